//! Processes: killing one and everything it started, for good; ending like another one ended.
//!
//! In a PID namespace (see `child::launcher`) killing the launcher is enough, but without one
//! a block's `setsid` children would escape a process-group kill, so [`kill_tree`] walks
//! `/proc` and stops every descendant before killing them all. Used by the host (a worker
//! without a PID namespace), by the worker itself when its host goes, and by the guard that
//! runs each MCP server.

use std::collections::{HashMap, HashSet};
#[cfg(test)]
use std::os::unix::process::ExitStatusExt;
#[cfg(test)]
use std::time::Duration;

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

/// Exits with `status`'s code, or dies by its signal.
pub fn exit_like(status: libc::c_int) -> ! {
    // SAFETY: plain syscalls; re-raising a fatal signal with its default action.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            71
        })
    }
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
