//! The embedded interpreter's start, with the standard library of the libpython this process
//! actually loaded.
//!
//! Left to itself, an embedded CPython finds its home the way the `python3` command does:
//! from the first `python3` on `PATH`, searching up from there for `lib/pythonX.Y/os.py`, and
//! only then from the prefix compiled into the library. Launched with a minimal environment
//! (`env -i PATH=/usr/bin:/bin`, as MCP clients start servers), that finds the system's
//! `/usr/lib/python3.11` while the loaded library is another build's (pyenv's, a venv's base):
//! its own extension modules (`_socket`, `_ssl`) are missing there, or worse, built for
//! another ABI. So the home is found from the library itself (`dladdr` on one of its
//! functions), searching up from its directory for that library's own version of the
//! standard library, and handed to the interpreter through `PyConfig.home`, never through
//! `PYTHONHOME` in the environment: a block's `sh.run('python3 …')` must start the user's
//! Python with the user's environment, not ours.
//!
//! A `PYTHONHOME` the user set is kept when it holds this version's standard library (the
//! interpreter reads it as `python3` would); one that does not (another version's) would
//! break the worker's start, so the library's own home wins.
//!
//! Everything else is as `Py_InitializeEx(0)` (what pyo3 calls) configures it: no C locale
//! coercion, no UTF-8 mode unless asked, no signal handlers, the C stdio left alone.

use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use pyo3::ffi;

use crate::runtime::RuntimeError;

/// This interpreter's version `(major, minor)`, from the library's version string (readable
/// before the interpreter starts).
fn library_version() -> Option<(u32, u32)> {
    // SAFETY: Py_GetVersion returns a pointer to a static NUL-terminated string; it may be
    // called before the interpreter is initialized.
    let text = unsafe { CStr::from_ptr(ffi::Py_GetVersion()) }
        .to_str()
        .ok()?;
    parse_version(text)
}

/// `(3, 11)` from `3.11.7 (main, …) [GCC …]`.
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let number = text.split_whitespace().next()?;
    let mut parts = number.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// The file of the loaded libpython, resolved; None when the interpreter is linked into this
/// binary (then the prefix compiled into it is all there is to go by).
fn loaded_library() -> Option<PathBuf> {
    // SAFETY: Dl_info is plain data (pointers and integers), valid all zero.
    let mut python: libc::Dl_info = unsafe { std::mem::zeroed() };
    let mut own: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr fills the struct for an address inside a loaded object; nothing is freed.
    let found = unsafe {
        libc::dladdr(ffi::Py_GetVersion as *const libc::c_void, &mut python) != 0
            && libc::dladdr(library_version as *const libc::c_void, &mut own) != 0
    };
    if !found || python.dli_fname.is_null() || python.dli_fbase == own.dli_fbase {
        return None;
    }
    // SAFETY: dli_fname points at the loader's NUL-terminated name of the object.
    let name = unsafe { CStr::from_ptr(python.dli_fname) };
    let path = PathBuf::from(OsString::from_vec(name.to_bytes().to_vec()));
    std::fs::canonicalize(&path).ok()
}

/// True when `prefix` holds the standard library of Python `version`: the landmark CPython
/// itself looks for (`os.py`, or only its bytecode in a stripped install) under `lib` or
/// `lib64` (the platform's library directory), in `pythonX.Y` or, for a free-threaded
/// build, `pythonX.Yt`.
fn holds_stdlib(prefix: &Path, (major, minor): (u32, u32)) -> bool {
    ["lib", "lib64"].iter().any(|libdir| {
        ["", "t"].iter().any(|suffix| {
            let stdlib = prefix
                .join(libdir)
                .join(format!("python{major}.{minor}{suffix}"));
            stdlib.join("os.py").is_file() || stdlib.join("os.pyc").is_file()
        })
    })
}

/// The prefix whose standard library belongs to the library at `library`: the nearest
/// directory above it that holds one (`<prefix>/lib/libpython3.11.so` and
/// `/usr/lib/x86_64-linux-gnu/libpython3.11.so` both lead to their own prefix).
fn home_of(library: &Path, version: (u32, u32)) -> Option<PathBuf> {
    library
        .ancestors()
        .skip(1)
        .find(|dir| holds_stdlib(dir, version))
        .map(Path::to_path_buf)
}

/// The `PYTHONHOME` the user set, when it holds this version's standard library (its first
/// part: `PREFIX:EXEC_PREFIX` is allowed).
fn usable_env_home(version: (u32, u32)) -> Option<OsString> {
    let home = std::env::var_os("PYTHONHOME").filter(|h| !h.is_empty())?;
    let prefix = home.as_bytes().split(|b| *b == b':').next()?;
    let prefix = Path::new(std::ffi::OsStr::from_bytes(prefix));
    holds_stdlib(prefix, version).then_some(home)
}

/// What the interpreter is told: its home and the program it stands for (the Python of that
/// home, so `sys.executable` and `sys._base_executable` name an interpreter of the same
/// build). Nothing when the home is neither given nor found (the interpreter's own search).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Placement {
    pub home: Option<PathBuf>,
    pub program: Option<PathBuf>,
}

/// Where this process's interpreter belongs (see the module docs).
pub(super) fn placement() -> Placement {
    let Some(version) = library_version() else {
        return Placement::default();
    };
    // The user's is read from the environment by the interpreter itself.
    let env_home = usable_env_home(version);
    let home = match env_home {
        Some(_) => None,
        None => loaded_library().and_then(|lib| home_of(&lib, version)),
    };
    let prefix = home.clone().or_else(|| {
        let env_home = env_home?;
        let prefix = env_home.as_bytes().split(|b| *b == b':').next()?.to_vec();
        Some(PathBuf::from(OsString::from_vec(prefix)))
    });
    let program = prefix.as_deref().and_then(|home| {
        let (major, minor) = version;
        [format!("python{major}.{minor}"), format!("python{major}")]
            .into_iter()
            .map(|name| home.join("bin").join(name))
            .find(|p| p.is_file())
    });
    Placement { home, program }
}

/// A failed `PyStatus` as an error naming what failed.
fn status_error(status: ffi::PyStatus, what: &str) -> RuntimeError {
    let text = |p: *const libc::c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: CPython's status messages are static NUL-terminated strings.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    RuntimeError::Worker(format!(
        "the interpreter could not start ({what}): {} {}",
        text(status.func),
        text(status.err_msg)
    ))
}

fn check(status: ffi::PyStatus, what: &str) -> Result<(), RuntimeError> {
    // SAFETY: PyStatus_Exception only reads the struct.
    if unsafe { ffi::PyStatus_Exception(status) } != 0 {
        return Err(status_error(status, what));
    }
    Ok(())
}

fn c_path(path: &Path) -> Result<CString, RuntimeError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        RuntimeError::Worker(format!(
            "the interpreter's path {} holds a NUL byte",
            path.display()
        ))
    })
}

/// Starts the interpreter with `placement` (see the module docs), then releases the GIL as
/// pyo3's own start does, so `Python::attach` works from here on.
pub(super) fn initialize(placement: &Placement) -> Result<(), RuntimeError> {
    // SAFETY: Py_IsInitialized may be called at any time.
    if unsafe { ffi::Py_IsInitialized() } != 0 {
        return Ok(());
    }
    // SAFETY: the configuration structs are initialized by CPython's own functions before
    // use, strings are copied by CPython, and the config is cleared on every path.
    unsafe {
        // Pre-initialized as `Py_InitializeEx` does (its "compat" configuration): the
        // locale as the environment says, not coerced to UTF-8.
        let mut pre = std::mem::MaybeUninit::<ffi::PyPreConfig>::uninit();
        ffi::PyPreConfig_InitPythonConfig(pre.as_mut_ptr());
        let mut pre = pre.assume_init();
        pre.parse_argv = 0;
        pre.coerce_c_locale = 0;
        pre.coerce_c_locale_warn = 0;
        pre.utf8_mode = 0;
        check(ffi::Py_PreInitialize(&pre), "pre-initialization")?;

        let mut config = std::mem::MaybeUninit::<ffi::PyConfig>::uninit();
        ffi::PyConfig_InitPythonConfig(config.as_mut_ptr());
        let mut config = config.assume_init();
        config.parse_argv = 0;
        config.configure_c_stdio = 0;
        config.install_signal_handlers = 0;
        let config: *mut ffi::PyConfig = &mut config;
        let result = (|| {
            if let Some(home) = &placement.home {
                let home = c_path(home)?;
                let field = std::ptr::addr_of_mut!((*config).home);
                check(
                    ffi::PyConfig_SetBytesString(config, field, home.as_ptr()),
                    "its home",
                )?;
            }
            if let Some(program) = &placement.program {
                let program = c_path(program)?;
                let field = std::ptr::addr_of_mut!((*config).program_name);
                check(
                    ffi::PyConfig_SetBytesString(config, field, program.as_ptr()),
                    "its program name",
                )?;
            }
            check(ffi::Py_InitializeFromConfig(config), "initialization")
        })();
        ffi::PyConfig_Clear(config);
        result?;
        ffi::PyEval_SaveThread();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_version_string() {
        assert_eq!(
            parse_version("3.11.7 (main, Dec  1 2026, 10:00:00) [GCC 12.2.0]"),
            Some((3, 11))
        );
        assert_eq!(parse_version("3.13.0rc1+ (heads/3.13:…)"), Some((3, 13)));
        assert_eq!(parse_version("3.14t"), Some((3, 14)));
        assert_eq!(parse_version("garbage"), None);
        assert_eq!(parse_version(""), None);
    }

    fn stdlib(prefix: &Path, libdir: &str, version: &str) {
        let dir = prefix.join(libdir).join(version);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("os.py"), "").unwrap();
    }

    #[test]
    fn the_home_is_the_nearest_prefix_with_this_versions_stdlib() {
        let root = tempfile::tempdir().unwrap();
        // pyenv's layout: <prefix>/lib/libpython3.11.so beside <prefix>/lib/python3.11.
        let pyenv = root.path().join("pyenv/versions/3.11.7");
        stdlib(&pyenv, "lib", "python3.11");
        let lib = pyenv.join("lib/libpython3.11.so.1.0");
        assert_eq!(home_of(&lib, (3, 11)), Some(pyenv.clone()));
        // Debian's: /usr/lib/x86_64-linux-gnu/libpython3.11.so, /usr/lib/python3.11.
        let usr = root.path().join("usr");
        stdlib(&usr, "lib", "python3.11");
        let multiarch = usr.join("lib/x86_64-linux-gnu/libpython3.11.so.1.0");
        assert_eq!(home_of(&multiarch, (3, 11)), Some(usr.clone()));
        // Fedora's lib64, and a free-threaded build's `t`.
        let fedora = root.path().join("fedora/usr");
        stdlib(&fedora, "lib64", "python3.13t");
        assert_eq!(
            home_of(&fedora.join("lib64/libpython3.13t.so"), (3, 13)),
            Some(fedora.clone())
        );
        // Another version's standard library is not this library's home.
        assert_eq!(home_of(&lib, (3, 12)), None);
    }

    #[test]
    fn a_home_without_this_versions_stdlib_is_not_used() {
        let root = tempfile::tempdir().unwrap();
        assert!(!holds_stdlib(root.path(), (3, 11)));
        std::fs::create_dir_all(root.path().join("lib/python3.11")).unwrap();
        assert!(
            !holds_stdlib(root.path(), (3, 11)),
            "no os.py: not a stdlib"
        );
        stdlib(root.path(), "lib", "python3.11");
        assert!(holds_stdlib(root.path(), (3, 11)));
        assert!(!holds_stdlib(root.path(), (3, 10)));
    }
}
