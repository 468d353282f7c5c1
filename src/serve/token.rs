//! The bearer token every request to `vis serve` carries: set explicitly (`VIS_SERVE_TOKEN`,
//! `[serve] token`), or generated at the first start into `serve-token` beside the database
//! ([`crate::config::serve_token_path`]), mode 0600, and read from there at later starts.
//!
//! The file is trusted only if it is a regular file of this user that nobody else can read:
//! another local user could otherwise plant a token they know (in a shared directory) or read
//! it. A symlink, a FIFO or a device in its place is refused, never followed or waited on.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq;

/// The shortest explicit token accepted (a generated one has 64 characters).
pub const MIN_TOKEN_CHARS: usize = 16;

/// Longest token file read (a token is one line).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// A usable token. Its `Debug` form never shows it.
#[derive(Clone)]
pub struct ServeToken(String);

impl std::fmt::Debug for ServeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServeToken(…)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the serve token from {origin} has {len} characters; use at least {MIN_TOKEN_CHARS} (e.g. the output of `openssl rand -hex 32`), or unset it to have one generated")]
    TooShort { origin: String, len: usize },
    #[error("the serve token from {origin} holds a space or a control character; use letters, digits and punctuation only")]
    BadCharacter { origin: String },
    #[error("{} is {what}, not a regular file; remove it so vis serve can generate its token there (or set VIS_SERVE_TOKEN)", path.display())]
    NotAFile { path: PathBuf, what: &'static str },
    #[error("{} belongs to uid {owner}, not to this user (uid {me}), so another user may know the token in it; remove it and start again to generate a new one", path.display())]
    ForeignOwner { path: PathBuf, owner: u32, me: u32 },
    #[error("{} can be read or changed by other users (mode {mode:03o}); run `chmod 600 {}`, or remove it to have a new token generated", path.display(), path.display())]
    OpenMode { path: PathBuf, mode: u32 },
    #[error("{} holds no usable token ({why}); remove it to have a new one generated", path.display())]
    Damaged { path: PathBuf, why: String },
    #[error("cannot read or create the serve token {}: {source}; check that directory's permissions, or set VIS_SERVE_TOKEN", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the system's random generator failed ({0}); set VIS_SERVE_TOKEN instead")]
    Random(String),
}

impl ServeToken {
    /// A token given explicitly; `source` names where it came from (for the error).
    pub fn explicit(text: &str, source: &str) -> Result<ServeToken, TokenError> {
        let text = text.trim();
        if text.chars().count() < MIN_TOKEN_CHARS {
            return Err(TokenError::TooShort {
                origin: source.to_string(),
                len: text.chars().count(),
            });
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::BadCharacter {
                origin: source.to_string(),
            });
        }
        Ok(ServeToken(text.to_string()))
    }

    /// 256 bits from the OS generator, as 64 hex digits.
    pub fn generate() -> Result<ServeToken, TokenError> {
        Ok(ServeToken(random_hex(32)?))
    }

    /// The token in `path`, or a new one written there (mode 0600) when there is none.
    pub fn load_or_create(path: &Path) -> Result<ServeToken, TokenError> {
        let io = |source| TokenError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Twice at most: another process may create the file between our open and create.
        for _ in 0..2 {
            match open_existing(path) {
                Ok(file) => return read_token(path, file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    return Err(TokenError::NotAFile {
                        path: path.to_path_buf(),
                        what: "a symbolic link",
                    })
                }
                Err(e) => return Err(io(e)),
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
            let token = ServeToken::generate()?;
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
            {
                Ok(mut file) => {
                    file.write_all(format!("{}\n", token.0).as_bytes())
                        .and_then(|()| file.sync_all())
                        .map_err(io)?;
                    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                        // The file's name is durable too (best effort: some filesystems
                        // cannot sync a directory).
                        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
                    }
                    return Ok(token);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io(e)),
            }
        }
        Err(io(std::io::Error::other(
            "it keeps appearing and disappearing",
        )))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `given` is this token, compared in constant time.
    pub fn matches(&self, given: &str) -> bool {
        given.as_bytes().ct_eq(self.0.as_bytes()).into()
    }
}

/// `bytes` random bytes from the OS generator, as hex.
pub(super) fn random_hex(bytes: usize) -> Result<String, TokenError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| TokenError::Random(e.to_string()))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Opens without following a symlink and without waiting on a FIFO.
fn open_existing(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

fn read_token(path: &Path, file: std::fs::File) -> Result<ServeToken, TokenError> {
    let meta = file.metadata().map_err(|source| TokenError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        let kind = meta.file_type();
        use std::os::unix::fs::FileTypeExt;
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "something else"
        };
        return Err(TokenError::NotAFile {
            path: path.to_path_buf(),
            what,
        });
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(TokenError::ForeignOwner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenError::OpenMode {
            path: path.to_path_buf(),
            mode,
        });
    }
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| TokenError::Damaged {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
    ServeToken::explicit(&text, &path.display().to_string()).map_err(|e| TokenError::Damaged {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_generated_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("serve-token");
        let first = ServeToken::load_or_create(&path).unwrap();
        assert_eq!(first.as_str().len(), 64);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let again = ServeToken::load_or_create(&path).unwrap();
        assert!(again.matches(first.as_str()));
        assert!(!again.matches("x"));
        assert!(!format!("{again:?}").contains(first.as_str()));
    }

    #[test]
    fn unsafe_token_files_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve-token");
        std::fs::write(&path, "a-token-that-is-long-enough\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = ServeToken::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&path, "short\n").unwrap();
        let e = ServeToken::load_or_create(&path).unwrap_err().to_string();
        assert!(
            e.contains("no usable token") && e.contains("remove it"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "short\n");
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", &path).unwrap();
        let e = ServeToken::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("a symbolic link"), "{e}");
        std::fs::remove_file(&path).unwrap();
        let fifo = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string for mkfifo.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = ServeToken::load_or_create(&path).unwrap_err().to_string();
        assert!(e.contains("a FIFO"), "{e}");
    }

    #[test]
    fn explicit_tokens_must_be_long_and_printable() {
        let e = ServeToken::explicit("s3cret", "VIS_SERVE_TOKEN")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("VIS_SERVE_TOKEN") && e.contains("6 characters") && e.contains("16"),
            "{e}"
        );
        let e = ServeToken::explicit("a token with spaces in it", "[serve] token")
            .unwrap_err()
            .to_string();
        assert!(e.contains("space"), "{e}");
        assert!(ServeToken::explicit(" 0123456789abcdef\n", "x")
            .unwrap()
            .matches("0123456789abcdef"));
    }
}
