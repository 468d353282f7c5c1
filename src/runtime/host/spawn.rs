//! Spawning a worker process and ending it for good.
//!
//! The worker is the same binary (`vis worker`) in its own process group, with a cleaned
//! environment and a capture file for its fd 1 and 2. It is started in two steps:
//! [`Launched::new`] starts the process, which execs and links while the host is still busy
//! (`vis exec` launches it before it opens the store), and [`WorkerProcess::start`] sends it
//! its first message, `start` ([`WorkerArgs`]: the workspace, the sandbox with the filesystem
//! view planned here (`sandbox::plan_view`), the limits), then waits for its `ready`.
//! [`WorkerProcess::spawn`] does both at once. The capture file has no name (`O_TMPFILE`): the
//! host reads it only through its own descriptor, so a block can neither swap it for a link to
//! the host's secrets, a FIFO or `/dev/zero`, nor reach another session's. Ending the worker
//! kills the whole tree under it (`runtime::process_tree`).

use std::fs::File;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::channel::{HostChannel, Incoming};
use super::env::worker_env;
use super::options::WorkerOptions;
use crate::catalog::ManifestEntry;
use crate::protocol::ExitInfo;
use crate::runtime::wire::{HostMessage, Isolation, WorkerArgs, WorkerMessage};
use crate::runtime::RuntimeError;

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitInfo::Code(c),
        (None, Some(s)) => ExitInfo::Signal(s),
        _ => ExitInfo::Unknown,
    }
}

/// A worker process started and waiting for its `start` message.
pub struct Launched {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    pid: i32,
    capture: File,
    tmp: tempfile::TempDir,
    /// What it was started as: a worker for other options is not this one.
    program: PathBuf,
    env: Vec<String>,
}

impl Launched {
    /// Starts `opts.program` as a worker with the environment `opts` allows (the allow-list
    /// and `[sandbox] env`). Needs a tokio runtime (entered, if not running).
    pub fn new(opts: &WorkerOptions) -> Result<Launched, RuntimeError> {
        let capture = capture_file().map_err(RuntimeError::Io)?;
        let stderr = capture.try_clone().map_err(RuntimeError::Io)?;
        let tmp = private_tmp().map_err(RuntimeError::Io)?;
        let mut cmd = Command::new(&opts.program);
        cmd.arg("worker")
            .env_clear()
            .envs(worker_env(&opts.env))
            .env("VIS_WORKER", "1")
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            // Its own process group: a terminal Ctrl-C reaches the host only.
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|source| RuntimeError::Spawn {
            program: opts.program.clone(),
            source,
        })?;
        let (Some(stdin), Some(stdout), Some(pid)) =
            (child.stdin.take(), child.stdout.take(), child.id())
        else {
            return Err(RuntimeError::Worker("worker pipes missing".into()));
        };
        Ok(Launched {
            child,
            stdin,
            stdout,
            pid: pid as i32,
            capture,
            tmp,
            program: opts.program.clone(),
            env: opts.env.clone(),
        })
    }

    /// The process's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// True when this process is what `opts` would start (the same program and environment).
    pub fn fits(&self, opts: &WorkerOptions) -> bool {
        self.program == opts.program && self.env == opts.env
    }
}

/// One live worker process.
pub(crate) struct WorkerProcess {
    child: Child,
    pub pid: i32,
    pub channel: HostChannel,
    /// fd 1 and 2 of the worker: a file without a name, read only through this descriptor.
    capture: File,
    pub python_version: String,
    pub manifest: Vec<ManifestEntry>,
    pub isolation: Isolation,
    /// The worker's own `TMPDIR` where the kernel gave it no private `/tmp` (mode 0700);
    /// removed with the worker, and swept by the next spawn if the host was killed. A worker
    /// that has a private `/tmp` never uses it: it is removed as soon as the worker says so.
    tmp: Option<tempfile::TempDir>,
    /// [`WorkerProcess::signal_kill`] ran: the processes are ended, only the reaping is left.
    killed: bool,
}

impl WorkerProcess {
    /// Starts a worker and waits for its `ready` (see [`WorkerProcess::start`]).
    pub async fn spawn(
        opts: &WorkerOptions,
        safe_mode: bool,
        first: Option<HostMessage>,
    ) -> Result<WorkerProcess, RuntimeError> {
        Self::start(Launched::new(opts)?, opts, safe_mode, first).await
    }

    /// Sends a launched worker its `start` message and waits for its `ready`. `first` is
    /// sent right after: the worker handles it right after `ready` without waiting for the
    /// host (a restore, at a start), and the caller then reads its answer.
    pub async fn start(
        launched: Launched,
        opts: &WorkerOptions,
        safe_mode: bool,
        first: Option<HostMessage>,
    ) -> Result<WorkerProcess, RuntimeError> {
        let Launched {
            child,
            mut stdin,
            stdout,
            pid,
            capture,
            tmp,
            ..
        } = launched;
        let cache_dir = opts.worker_cache_dir();
        let args = WorkerArgs {
            memory_limit_mb: opts.memory_limit_mb,
            workspace: opts.workspace.clone(),
            config_dir: opts.config_dir.clone(),
            deny: opts.deny.clone(),
            safe_mode,
            trusted: opts.trusted,
            sandbox: worker_policy(opts, tmp.path()),
            cache_dir: cache_dir.clone(),
        };
        // Written now, by this call itself: the worker waits for it, and an `await` would let
        // a caller do other work first (vis exec writes its turn while the worker starts).
        let sent = start_frame(args).map_err(RuntimeError::Io);
        let sent = match sent {
            Ok(frame) => send_now(&mut stdin, &frame).await.map_err(RuntimeError::Io),
            Err(e) => Err(e),
        };
        let mut worker = WorkerProcess {
            child,
            pid,
            channel: HostChannel::new(stdin, stdout),
            capture,
            python_version: String::new(),
            manifest: Vec::new(),
            isolation: Isolation::default(),
            tmp: Some(tmp),
            killed: false,
        };
        if let Some(ws) = &opts.workspace {
            // The worker runs there: a workspace that is gone is the caller's to fix.
            if let Err(source) = std::fs::metadata(ws) {
                worker.kill().await;
                return Err(RuntimeError::Workspace {
                    path: ws.clone(),
                    source,
                });
            }
        }
        if let Err(e) = sent {
            worker.kill().await;
            return Err(RuntimeError::WorkerStart(format!(
                "cannot send the worker its settings ({e}); output: {}",
                worker.capture_text().trim()
            )));
        }
        if let Some(message) = first {
            worker.channel.send(message);
        }
        // Other hosts' leftovers are swept while this worker starts, not before: reading the
        // temp directory (hundreds of entries on a busy machine) is off the start's path.
        sweep_stale_tmp(&std::env::temp_dir());
        let ready = tokio::time::timeout(opts.startup_timeout, worker.channel.recv()).await;

        match ready {
            Ok(Incoming::Message(WorkerMessage::Ready {
                python_version,
                manifest,
                isolation,
                cache_writes,
                ..
            })) => {
                if let Some(dir) = &cache_dir {
                    crate::runtime::cache::write_all(dir, &cache_writes);
                }
                if isolation.private_tmp {
                    // Its TMPDIR is its own `/tmp`, and the view covers ours: removed now,
                    // while the worker restores, not on the way out (a directory removal is
                    // a journal write).
                    if let Some(tmp) = worker.tmp.take() {
                        let _ = tmp.close();
                    }
                }
                worker.python_version = python_version;
                worker.manifest = manifest;
                worker.isolation = isolation;
                Ok(worker)
            }
            Ok(Incoming::Message(WorkerMessage::Fatal { message })) => {
                worker.kill().await;
                Err(RuntimeError::WorkerStart(message))
            }
            Ok(Incoming::Message(other)) => {
                worker.kill().await;
                Err(RuntimeError::WorkerStart(format!(
                    "expected ready from the worker, got {}",
                    other.kind()
                )))
            }
            Ok(Incoming::Invalid(detail)) => {
                worker.kill().await;
                Err(RuntimeError::WorkerStart(format!(
                    "the worker sent an invalid message while starting ({detail}); output: {}",
                    worker.capture_text().trim()
                )))
            }
            Err(_) => {
                worker.kill().await;
                Err(RuntimeError::WorkerStart(format!(
                    "no ready signal within {:?}; output: {}",
                    opts.startup_timeout,
                    worker.capture_text().trim()
                )))
            }
            Ok(Incoming::Closed) => {
                let exit = worker.wait_exit().await;
                Err(RuntimeError::WorkerStart(format!(
                    "the worker {exit}: {}",
                    worker.capture_text().trim()
                )))
            }
        }
    }

    /// What the worker printed (shown when it fails to start): its first 64 KiB.
    pub fn capture_text(&self) -> String {
        let mut raw = vec![0u8; 64 * 1024];
        match self.capture.read_at(&mut raw, 0) {
            Ok(n) => String::from_utf8_lossy(&raw[..n]).into_owned(),
            Err(e) => format!("(cannot read the worker's output: {e})"),
        }
    }

    /// The worker's fd 1 and 2, as the host opened it.
    pub fn capture(&self) -> &File {
        &self.capture
    }

    /// Waits for a worker that closed its pipe to finish exiting (killing it if it lingers).
    pub async fn wait_exit(&mut self) -> ExitInfo {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => {
                // The worker is gone; anything it left behind (no PID namespace) goes too.
                if !self.isolation.pid_namespace {
                    crate::runtime::process::kill_tree(self.pid, false);
                }
                exit_info(status)
            }
            _ => self.kill().await,
        }
    }

    /// Kills the worker for good, without waiting (see [`WorkerProcess::signal_kill`]), from
    /// a process that exits next (`vis exec`): the last close of the capture file, which frees
    /// its blocks, is left to [`crate::release`] (a child of this process closes it after
    /// this process has exited). While the worker lives it holds the file too, so the copy
    /// handed over is taken before the kill.
    pub fn end_before_exit(&mut self) {
        if let Ok(copy) = self.capture.try_clone() {
            crate::release::release(copy.into());
        }
        self.signal_kill();
    }

    /// Kills the worker and everything it started, without waiting: [`WorkerProcess::kill`]
    /// reaps it (a caller with other work before then lets the kernel end it meanwhile).
    pub fn signal_kill(&mut self) {
        self.killed = true;
        if self.isolation.pid_namespace {
            // Killing the launcher's group is enough: init dies with the launcher (its
            // parent-death signal), and the kernel kills everything left in the namespace.
            // That spares a walk over /proc at every `vis exec`.
            if let Some(group) = rustix::process::Pid::from_raw(self.pid) {
                // Already gone is fine.
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
        } else {
            crate::runtime::process::kill_tree(self.pid, true);
        }
    }

    /// Kills the worker and everything it started, and reaps it.
    pub async fn kill(&mut self) -> ExitInfo {
        if !self.killed {
            self.signal_kill();
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(Ok(status)) => exit_info(status),
            _ => ExitInfo::Unknown,
        }
    }
}

/// The `start` message as one frame (`wire::codec`).
fn start_frame(args: WorkerArgs) -> std::io::Result<bytes::BytesMut> {
    use tokio_util::codec::Encoder;
    let message = HostMessage::Start {
        args: Box::new(args),
    };
    let payload = serde_json::to_vec(&message)?;
    let mut frame = bytes::BytesMut::with_capacity(payload.len() + 4);
    crate::runtime::wire::codec().encode(bytes::Bytes::from(payload), &mut frame)?;
    Ok(frame)
}

/// Writes `frame` to the worker's stdin with plain `write` calls, which put a small frame
/// into the empty pipe at once (tokio's own write waits for the event loop to report the pipe
/// writable first); what a full pipe did not take is written the async way.
async fn send_now(stdin: &mut ChildStdin, frame: &[u8]) -> std::io::Result<()> {
    let mut written = 0;
    while written < frame.len() {
        match rustix::io::write(&*stdin, &frame[written..]) {
            Ok(n) => written += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => return Err(e.into()),
        }
    }
    stdin.write_all(&frame[written..]).await
}

/// The unnamed file a worker's fd 1 and 2 point at (append mode, so every writer adds at the
/// end even after the worker empties it between blocks).
fn capture_file() -> std::io::Result<File> {
    let file = tempfile::tempfile()?;
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags | rustix::fs::OFlags::APPEND)?;
    Ok(file)
}

/// Prefix of the worker temp directories in the host's temp dir; the host's pid follows.
const TMP_PREFIX: &str = "vis-tmp-";

/// A temp directory of the worker's own, mode 0700, named after this process so a later
/// spawn can sweep it if this process is killed before it removes it.
fn private_tmp() -> std::io::Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(&format!("{TMP_PREFIX}{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
}

/// Removes the worker temp directories of hosts that are gone (a `kill -9` leaves them).
fn sweep_stale_tmp(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = rustix::process::geteuid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TMP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let ours = entry
            .metadata()
            .is_ok_and(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == me.as_raw());
        if ours && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The policy a worker enters: the options' one, with its filesystem view planned and the
/// paths Landlock alone lets it write where the kernel gives it no view.
fn worker_policy(opts: &WorkerOptions, tmp: &Path) -> crate::sandbox::Policy {
    use crate::sandbox::Mode;
    let mut policy = opts.sandbox.clone();
    let roots: Vec<PathBuf> = opts
        .workspace
        .iter()
        .cloned()
        .chain(policy.extra_roots.iter().cloned())
        .collect();
    let vis = crate::sandbox::VisPlaces {
        data_dir: opts.data_dir.clone(),
        config_dir: opts.config_dir.clone(),
        cache_dir: opts.cache_dir.clone(),
    };
    let worker_reads: Vec<PathBuf> = opts
        .config_dir
        .iter()
        .flat_map(|dir| [dir.join("extensions"), dir.join("skills")])
        .collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if matches!(policy.mode, Mode::ReadOnly | Mode::WorkspaceWrite) {
        policy.view = Some(crate::sandbox::plan_view(
            &policy,
            &roots,
            home.as_deref(),
            &vis,
            &worker_reads,
        ));
    }
    let mut writable = policy.session_dirs.clone();
    writable.push(tmp.to_path_buf());
    if policy.mode == Mode::WorkspaceWrite {
        writable.extend(roots);
        writable.extend(policy.writable.iter().cloned());
        // Where tools write scratch files by habit, as in Codex's workspace-write.
        writable.push("/tmp".into());
        writable.push("/var/tmp".into());
    }
    writable.sort();
    writable.dedup();
    policy.writable = writable;
    policy
}
