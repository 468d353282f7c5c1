//! A small tmux driver for testing the interactive `vis chat` as a person uses it: a detached
//! session of a fixed size on a private server (`-L`, so a user's tmux is never touched),
//! keys sent with `send-keys`, the screen read with `capture-pane`. Every wait polls the screen
//! up to a deadline (no fixed sleeps), and the server is killed on drop.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub const WIDTH: u16 = 120;
pub const HEIGHT: u16 = 40;
/// Generous: the machine may be busy building other things.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `program args` in a new `WIDTH`x`HEIGHT` pane with `env` set, in `cwd`.
    pub fn start(cwd: &Path, env: &[(&str, String)], program: &Path, args: &[String]) -> Tmux {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("vis-test-{}-{n}", std::process::id());
        let conf = std::env::temp_dir().join(format!("{socket}.conf"));
        // The pane stays after the program exits (so its end can be seen); no status bar, so
        // the program gets all the rows.
        std::fs::write(
            &conf,
            "set -g remain-on-exit on\nset -g status off\nset -sg escape-time 0\nset -g history-limit 100000\n",
        )
        .unwrap();
        let tmux = Tmux { socket };
        let mut cmd = tmux.command();
        cmd.arg("-f").arg(&conf).args([
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            &WIDTH.to_string(),
            "-y",
            &HEIGHT.to_string(),
            "-c",
        ]);
        cmd.arg(cwd);
        for (k, v) in env {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg("-e").arg("TERM=xterm-256color");
        // The exit status is printed by a shell around the program (tmux's own
        // `pane_dead_status` is not always filled in). A Ctrl-C during a turn reaches the whole
        // foreground group, this shell too: dash would die of it once the program exits, so it
        // catches SIGINT with a no-op (a handler, unlike an ignore, is not inherited by exec).
        cmd.args([
            "sh",
            "-c",
            "trap : INT; \"$0\" \"$@\"; echo \"[exited $?]\"",
        ]);
        cmd.arg(program).args(args);
        let out = cmd.output().expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::remove_file(&conf);
        tmux
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-L").arg(&self.socket);
        cmd
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `text` literally (no key names).
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "main", "-l", text]);
    }

    /// Presses keys by tmux name: `Enter`, `C-c`, `C-d`, `M-Enter`, `C-o`.
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types `text` and presses Enter.
    pub fn send_line(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// Resizes the window (and its pane) to `width` x `height`, as a person dragging the
    /// terminal's edge would.
    pub fn resize(&self, width: u16, height: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            "main",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// The whole pane: scrollback and screen, wrapped lines joined.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-", "-t", "main"])
    }

    /// The visible screen only, with its escape sequences (colors).
    pub fn screen_styled(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-t", "main"])
    }

    /// The visible screen only.
    pub fn visible(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "main"])
    }

    pub fn pane(&self, format: &str) -> String {
        self.tmux(&["display-message", "-p", "-t", "main", format])
            .trim()
            .to_string()
    }

    /// The program in the pane has exited.
    pub fn dead(&self) -> bool {
        self.pane("#{pane_dead}") == "1"
    }

    /// Waits until `cond(screen)` holds; panics with the screen when the deadline passes.
    pub fn wait_for(&self, what: &str, mut cond: impl FnMut(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Waits until the screen contains `text`.
    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(&format!("{text:?}"), |s| s.contains(text))
    }

    /// Waits until the screen contains `text` `n` times.
    pub fn wait_count(&self, text: &str, n: usize) -> String {
        self.wait_for(&format!("{n} × {text:?}"), |s| {
            s.matches(text).count() >= n
        })
    }

    /// Waits until the program has exited; returns its exit status.
    pub fn wait_exit(&self) -> i32 {
        let screen = self.wait_text("[exited ");
        let tail = screen.rsplit("[exited ").next().unwrap_or_default();
        tail.split(']')
            .next()
            .unwrap_or_default()
            .parse()
            .unwrap_or_else(|_| {
                panic!("no exit status on the screen:\n{screen}");
            })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // `VIS_TEST_SHOW_SCREEN=1 cargo test … -- --nocapture` shows each final screen.
        if std::env::var_os("VIS_TEST_SHOW_SCREEN").is_some() {
            println!("──── final screen ────\n{}", self.screen());
        }
        let _ = self.command().arg("kill-server").output();
    }
}
