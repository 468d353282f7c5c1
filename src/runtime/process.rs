//! Spawning a worker process and ending it for good.
//!
//! The worker is the same binary (`vis worker`) in its own process group, with a cleaned
//! environment and a capture file for its fd 1 and 2. Ending it kills the whole tree under it:
//! in a PID namespace (see `launcher`) killing the launcher is enough, but without one a block's
//! `setsid` children would escape a process-group kill, so [`kill_tree`] walks `/proc` and
//! stops every descendant before killing them all.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::channel::{HostChannel, Incoming};
use super::env::worker_env;
use super::wire::{HostMessage, Isolation, WorkerMessage};
use super::{RuntimeError, WorkerOptions};
use crate::catalog::ManifestEntry;
use crate::protocol::ExitInfo;

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    match (status.code(), status.signal()) {
        (Some(c), _) => ExitInfo::Code(c),
        (None, Some(s)) => ExitInfo::Signal(s),
        _ => ExitInfo::Unknown,
    }
}

/// One live worker process.
pub(crate) struct WorkerProcess {
    child: Child,
    pub pid: i32,
    pub channel: HostChannel,
    /// fd 1 and 2 of the worker; removed when the worker is dropped.
    pub capture: tempfile::NamedTempFile,
    pub python_version: String,
    pub manifest: Vec<ManifestEntry>,
    pub isolation: Isolation,
    /// The worker's own `TMPDIR` (writable in every sandbox mode); removed with the worker.
    _tmp: tempfile::TempDir,
}

impl WorkerProcess {
    /// Starts a worker and waits for its `ready`. `first` is sent as soon as the process
    /// exists: the worker handles it right after `ready` without waiting for the host (a
    /// restore, at a start), and the caller then reads its answer.
    pub async fn spawn(
        opts: &WorkerOptions,
        safe_mode: bool,
        first: Option<HostMessage>,
    ) -> Result<WorkerProcess, RuntimeError> {
        let capture = tempfile::Builder::new()
            .prefix("vis-worker-")
            .suffix(".out")
            .tempfile()
            .map_err(RuntimeError::Io)?;
        let stderr = OpenOptions::new()
            .append(true)
            .open(capture.path())
            .map_err(RuntimeError::Io)?;
        let mut cmd = Command::new(&opts.program);
        cmd.arg("worker")
            .arg("--capture")
            .arg(capture.path())
            .arg("--memory-limit-mb")
            .arg(opts.memory_limit_mb.to_string());
        if let Some(ws) = &opts.workspace {
            cmd.arg("--workspace").arg(ws);
            cmd.current_dir(ws);
        }
        if let Some(dir) = &opts.config_dir {
            cmd.arg("--config-dir").arg(dir);
        }
        for name in &opts.deny {
            cmd.arg("--deny").arg(name);
        }
        if safe_mode {
            cmd.arg("--safe-mode");
        }
        if opts.trusted {
            cmd.arg("--trusted");
        }
        let cache_dir = opts.worker_cache_dir();
        if let Some(dir) = &cache_dir {
            cmd.arg("--cache-dir").arg(dir);
        }
        let tmp = crate::sandbox::private_tmp().map_err(RuntimeError::Io)?;
        let policy = worker_policy(opts, tmp.path());
        cmd.arg("--sandbox").arg(
            serde_json::to_string(&policy).map_err(|e| RuntimeError::Protocol(e.to_string()))?,
        );
        cmd.env_clear()
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
        let mut worker = WorkerProcess {
            child,
            pid: pid as i32,
            channel: HostChannel::new(stdin, stdout),
            capture,
            python_version: String::new(),
            manifest: Vec::new(),
            isolation: Isolation::default(),
            _tmp: tmp,
        };
        if let Some(message) = first {
            worker.channel.send(message);
        }
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
                    super::cache::write_all(dir, &cache_writes);
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

    /// What the worker printed (shown when it fails to start).
    pub fn capture_text(&self) -> String {
        match std::fs::read(self.capture.path()) {
            Ok(raw) => String::from_utf8_lossy(&raw).into_owned(),
            Err(e) => format!("(cannot read the worker's output: {e})"),
        }
    }

    pub fn capture_path(&self) -> &Path {
        self.capture.path()
    }

    /// Waits for a worker that closed its pipe to finish exiting (killing it if it lingers).
    pub async fn wait_exit(&mut self) -> ExitInfo {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) => {
                // The worker is gone; anything it left behind (no PID namespace) goes too.
                if !self.isolation.pid_namespace {
                    kill_tree(self.pid, false);
                }
                exit_info(status)
            }
            _ => self.kill().await,
        }
    }

    /// Kills the worker and everything it started, and reaps it.
    pub async fn kill(&mut self) -> ExitInfo {
        if self.isolation.pid_namespace {
            // Killing the launcher's group is enough: init dies with the launcher (its
            // parent-death signal), and the kernel kills everything left in the namespace.
            // That spares a walk over /proc at every `vis exec`.
            if let Some(group) = rustix::process::Pid::from_raw(self.pid) {
                // Already gone is fine.
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
        } else {
            kill_tree(self.pid, true);
        }
        match tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await {
            Ok(Ok(status)) => exit_info(status),
            _ => ExitInfo::Unknown,
        }
    }
}

/// The policy a worker enters: the options' one, with the paths it may write completed.
fn worker_policy(opts: &WorkerOptions, tmp: &Path) -> crate::sandbox::Policy {
    use crate::sandbox::Mode;
    let mut policy = opts.sandbox.clone();
    policy.writable.push(tmp.to_path_buf());
    if policy.mode == Mode::WorkspaceWrite {
        if let Some(ws) = &opts.workspace {
            policy.writable.push(ws.clone());
        }
        // Where tools write scratch files by habit, as in Codex's workspace-write.
        policy.writable.push("/tmp".into());
        policy.writable.push("/var/tmp".into());
    }
    policy.writable.sort();
    policy.writable.dedup();
    policy
}

/// SIGKILLs the process group `root` leads and every descendant of `root` (and `root` itself
/// when `include_root`). Descendants are stopped first so none can fork while the tree is
/// collected.
pub fn kill_tree(root: i32, include_root: bool) {
    // SAFETY: signalling a process group we created; errors (already gone) are fine. The
    // root is stopped first so it can neither fork nor react to its children's deaths.
    unsafe {
        if include_root {
            libc::kill(root, libc::SIGSTOP);
            libc::kill(-root, libc::SIGKILL);
        }
    }
    let mut seen: HashSet<i32> = HashSet::new();
    // A few rounds: a process may fork between one scan and its SIGSTOP.
    for _ in 0..4 {
        let found: Vec<i32> = descendants(root)
            .into_iter()
            .filter(|p| !seen.contains(p))
            .collect();
        if found.is_empty() {
            break;
        }
        for &pid in &found {
            // SAFETY: plain kill(2) on a pid we just read from /proc.
            unsafe {
                libc::kill(pid, libc::SIGSTOP);
            }
            seen.insert(pid);
        }
    }
    for &pid in &seen {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    if include_root {
        // SAFETY: as above.
        unsafe {
            libc::kill(root, libc::SIGKILL);
        }
    }
}

/// All descendants of `root`, read from `/proc/*/stat`.
fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so split after the
        // last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (Some(state), Some(ppid)) = (fields.next(), fields.next()) else {
            continue;
        };
        // A zombie is already dead (and has handed its children on).
        if state == "Z" {
            continue;
        }
        if let Ok(ppid) = ppid.parse::<i32>() {
            children.entry(ppid).or_default().push(pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![root];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            out.push(child);
            queue.push(child);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_finds_grandchildren() {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 30 & sleep 30 & wait")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let mut found = Vec::new();
        for _ in 0..200 {
            found = descendants(pid);
            if found.len() >= 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(found.len(), 2, "{found:?}");
        kill_tree(pid, true);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // The killed children may take a moment to be reaped by init.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !descendants(pid).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(descendants(pid).is_empty());
    }
}
