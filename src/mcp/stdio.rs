//! Protocol hygiene for `vis mcp`: nothing but MCP may ever reach the real stdout.
//!
//! The worker already captures its own output, but the host guards fd 1 as well. At start,
//! before anything else runs, [`take_protocol_streams`] duplicates the real stdin and stdout
//! to private close-on-exec descriptors that only the MCP transport uses, then points fd 1 at
//! stderr and fd 0 at `/dev/null`. A stray `print!` in Rust, a C-level write, or any process
//! the host starts (MCP servers, the worker's launcher) can then only reach stderr, where logs
//! belong, and nothing can read the client's requests from under the transport.
//!
//! When the client's ends are pipes (as MCP clients launch servers), the private descriptors
//! are reopened through `/proc/self/fd` with `O_NONBLOCK` on their own open file
//! descriptions and driven by tokio's pipe driver (no blocking thread per message); otherwise
//! (a file, a terminal) tokio's blocking file wrapper is used.

use std::fs::File;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The real stdin and stdout, moved out of fds 0 and 1 (not yet registered with tokio).
pub struct ProtocolStreams {
    input: OwnedFd,
    output: OwnedFd,
}

fn dup_cloexec(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // At 3 or above: never one of the standard descriptors about to be repointed.
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 3)?)
}

/// Moves the real stdin/stdout to private descriptors; fd 1 becomes stderr, fd 0 `/dev/null`.
/// Call it first thing, before any thread or child process exists.
pub fn take_protocol_streams() -> io::Result<ProtocolStreams> {
    use rustix::stdio;
    let input = dup_cloexec(stdio::stdin())?;
    let output = dup_cloexec(stdio::stdout())?;
    // Rust's own stdout buffer must not hold bytes meant for the old fd 1.
    let _ = io::Write::flush(&mut io::stdout());
    stdio::dup2_stdout(stdio::stderr())?;
    // Without /dev/null fd 0 stays the client's stdin; the transport reads its own copy.
    if let Ok(devnull) = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        let _ = stdio::dup2_stdin(&devnull);
    }
    Ok(ProtocolStreams { input, output })
}

impl ProtocolStreams {
    /// The transport's reader and writer (call inside a tokio runtime).
    pub fn into_async(self) -> io::Result<(ProtocolReader, ProtocolWriter)> {
        let reader = match reopen_fifo(&self.input, false) {
            Some(fd) => ProtocolReader::Pipe(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?),
            None => ProtocolReader::File(tokio::fs::File::from_std(File::from(self.input))),
        };
        let writer = match reopen_fifo(&self.output, true) {
            Some(fd) => ProtocolWriter::Pipe(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?),
            None => ProtocolWriter::File(tokio::fs::File::from_std(File::from(self.output))),
        };
        Ok((reader, writer))
    }
}

/// A non-blocking descriptor of its own for `fd` when it is a FIFO.
fn reopen_fifo(fd: &OwnedFd, write: bool) -> Option<OwnedFd> {
    let file = File::from(fd.try_clone().ok()?);
    if !file.metadata().ok()?.file_type().is_fifo() {
        return None;
    }
    let raw = std::os::fd::AsRawFd::as_raw_fd(&file);
    let reopened = std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(format!("/proc/self/fd/{raw}"))
        .ok()?;
    Some(reopened.into())
}

/// The transport's end of the client's stdout.
pub enum ProtocolWriter {
    Pipe(tokio::net::unix::pipe::Sender),
    File(tokio::fs::File),
}

/// The transport's end of the client's stdin.
pub enum ProtocolReader {
    Pipe(tokio::net::unix::pipe::Receiver),
    File(tokio::fs::File),
}

impl AsyncRead for ProtocolReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ProtocolReader::Pipe(r) => Pin::new(r).poll_read(cx, buf),
            ProtocolReader::File(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ProtocolWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ProtocolWriter::Pipe(w) => Pin::new(w).poll_write(cx, buf),
            ProtocolWriter::File(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ProtocolWriter::Pipe(w) => Pin::new(w).poll_flush(cx),
            ProtocolWriter::File(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ProtocolWriter::Pipe(w) => Pin::new(w).poll_shutdown(cx),
            ProtocolWriter::File(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHILD: &str = "VIS_TEST_STDIO_GUARD_CHILD";

    /// Runs in a child process of the test binary (the guard rewires fds 0 and 1, which the
    /// test harness itself uses): stray writes of every kind must land on stderr, and only
    /// what the transport writes reaches the real stdout.
    #[test]
    fn stray_writes_reach_stderr_and_only_the_transport_reaches_stdout() {
        if std::env::var_os(CHILD).is_some() {
            child();
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "mcp::stdio::tests::stray_writes_reach_stderr_and_only_the_transport_reaches_stdout",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, "1")
            .stdin(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        // The harness prints its header and the test's name before the guard is in place;
        // after them, only the transport's bytes.
        let after = stdout.rsplit(" ... ").next().unwrap_or(&stdout);
        assert_eq!(after, "PROTOCOL\n", "stdout: {stdout:?}\nstderr: {stderr}");
        for stray in ["stray println", "raw fd 1", "from a child process"] {
            assert!(stderr.contains(stray), "{stray}: {stderr}");
        }
    }

    fn child() -> ! {
        use tokio::io::AsyncWriteExt;
        let streams = take_protocol_streams().unwrap();
        println!("stray println");
        // Straight to fd 1, past Rust's stdout.
        rustix::io::write(rustix::stdio::stdout(), b"raw fd 1\n").unwrap();
        std::process::Command::new("sh")
            .args(["-c", "echo from a child process"])
            .status()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (_reader, mut writer) = streams.into_async().unwrap();
            writer.write_all(b"PROTOCOL\n").await.unwrap();
            writer.flush().await.unwrap();
        });
        std::process::exit(0)
    }
}
