//! Shared helpers: a temp directory per test with its own database and workspace, the `vis`
//! binary, and a `Runtime` wired to it.

#![allow(dead_code)]

pub mod chat;
pub mod fake_provider;
pub mod mcp;
pub mod postgres;
pub mod procs;
pub mod serve;
pub mod tmux;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use vis::protocol::{Block, BlockResult, PersistedDef};
use vis::runtime::{NoHostCalls, Runtime, WorkerOptions};

pub fn vis_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vis"))
}

/// The worker binary (`vis-worker`, beside `vis`).
pub fn worker_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vis-worker"))
}

/// One test's world: a temp dir holding `vis.db`, a `workspace/` and `home/` (VIS_HOME).
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    /// A PostgreSQL database this env's commands use instead of `vis.db` ([`TestEnv::use_postgres`]).
    postgres: std::cell::OnceCell<String>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl TestEnv {
    /// A world whose workspace the user trusts (its own extensions load), as most tests need.
    pub fn new() -> TestEnv {
        let env = TestEnv::untrusted();
        vis::trust::trust(&env.config_dir(), &env.workspace()).unwrap();
        env
    }

    /// A world whose workspace is not trusted yet.
    pub fn untrusted() -> TestEnv {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("workspace")).unwrap();
        TestEnv {
            dir,
            postgres: std::cell::OnceCell::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The store this env's commands use: `vis.db` in its dir, or the PostgreSQL URL chosen by
    /// [`TestEnv::use_postgres`] (`store::open` and `--db` take either).
    pub fn db(&self) -> PathBuf {
        match self.postgres.get() {
            Some(url) => PathBuf::from(url),
            None => self.dir.path().join("vis.db"),
        }
    }

    /// From now on this env's store is a fresh database on the tests' PostgreSQL cluster.
    pub fn use_postgres(&self) {
        let url = postgres::database();
        assert!(self.postgres.set(url).is_ok(), "use_postgres called twice");
    }

    /// From now on this env's store is the PostgreSQL database at `url` (a test's own
    /// cluster, one it restarts).
    pub fn use_postgres_at(&self, url: String) {
        assert!(self.postgres.set(url).is_ok(), "use_postgres called twice");
    }

    /// Where Vis keeps this env's files beside its store (the serve token, artifacts): the
    /// env's dir for `vis.db`, `VIS_HOME/postgres/<database key>` for PostgreSQL.
    pub fn store_dir(&self) -> PathBuf {
        match self.postgres.get() {
            Some(url) => self
                .dir
                .path()
                .join("home")
                .join("postgres")
                .join(vis::store::state_key(url)),
            None => self.dir.path().to_path_buf(),
        }
    }

    /// The user config directory of this env (`VIS_CONFIG_DIR` of its commands; may not exist).
    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    /// Vis's cache directory in this env (`$VIS_HOME/cache`, as its commands find it).
    pub fn cache_dir(&self) -> PathBuf {
        self.dir.path().join("home").join("cache")
    }

    /// The cache directory the workers of this env's workspace use while it is trusted (as
    /// `TestEnv::new` makes it): that workspace's own, under `cache_dir` (see
    /// `vis::runtime::cache::workspace_dir`).
    pub fn worker_cache_dir(&self) -> PathBuf {
        vis::runtime::cache::workspace_dir(&self.cache_dir(), &self.workspace(), true)
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace").canonicalize().unwrap()
    }

    /// A `vis` command with `--db` and `VIS_HOME` pointing into this env.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(vis_bin());
        cmd.arg("--db").arg(self.db()).args(args);
        cmd.env("VIS_HOME", self.dir.path().join("home"));
        cmd.env("VIS_CONFIG_DIR", self.config_dir());
        cmd.current_dir(self.workspace());
        cmd.stdin(Stdio::null());
        cmd
    }

    /// `vis ARGS` with `VIS_HOME` in this env but no `--db` (for tests that choose it).
    pub fn vis_raw(&self, args: &[&str]) -> Run {
        let mut cmd = Command::new(vis_bin());
        cmd.args(args)
            .env_remove("VIS_DB")
            .env("VIS_HOME", self.dir.path().join("home"))
            .env("VIS_CONFIG_DIR", self.config_dir())
            .current_dir(self.workspace());
        cmd.stdin(Stdio::null()).output().unwrap().into()
    }

    pub fn vis(&self, args: &[&str]) -> Run {
        self.command(args).output().unwrap().into()
    }

    /// The id of the most recently used session (the first row of `vis sessions list`).
    pub fn newest_session(&self) -> String {
        self.vis(&["sessions", "list"])
            .stdout
            .lines()
            .nth(1)
            .and_then(|row| row.split_whitespace().next())
            .expect("a session is listed")
            .to_string()
    }

    /// `vis exec --session S --workspace W CODE`.
    pub fn exec(&self, session: &str, code: &str) -> Run {
        let ws = self.workspace();
        self.vis(&[
            "exec",
            "--session",
            session,
            "--workspace",
            ws.to_str().unwrap(),
            code,
        ])
    }

    /// `vis exec --session S -` with `code` on standard input.
    pub fn exec_stdin(&self, session: &str, code: &[u8]) -> Run {
        use std::io::Write;
        let mut child = self
            .command(&["exec", "--session", session, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(code).unwrap();
        child.wait_with_output().unwrap().into()
    }

    pub fn runtime(&self) -> Runtime {
        self.runtime_with(|_| {}, vec![])
    }

    pub fn runtime_with(
        &self,
        tweak: impl FnOnce(&mut WorkerOptions),
        defs: Vec<PersistedDef>,
    ) -> Runtime {
        let mut opts = WorkerOptions::new(worker_bin());
        opts.workspace = Some(self.workspace());
        opts.interrupt_grace = Duration::from_millis(1500);
        opts.trusted = true;
        opts.cache_dir = Some(self.cache_dir());
        // Where `block()` keeps full outputs: the session's own directory, writable.
        let artifacts = self.dir.path().join("artifacts");
        std::fs::create_dir_all(&artifacts).unwrap();
        opts.sandbox.session_dirs.push(artifacts);
        tweak(&mut opts);
        Runtime::new(opts, defs)
    }

    pub fn block(&self, code: &str) -> Block {
        self.block_with_timeout(code, Duration::from_secs(60))
    }

    pub fn block_with_timeout(&self, code: &str, timeout: Duration) -> Block {
        let art = self.dir.path().join("artifacts");
        Block {
            code: code.to_string(),
            filename: "<t1/i1>".into(),
            session: vis::protocol::SessionInfo::new(
                "s",
                1,
                1,
                vis::protocol::SessionCounts::default(),
                vis::protocol::Utilization::without_requests(),
            ),
            output_limit: 20_000,
            artifact_path: art.join("t1-i1.txt"),
            artifact_dir: art,
            workspace_roots: vec![self.workspace()],
            timeout,
            artifact_quota: vis::runtime::DEFAULT_ARTIFACT_QUOTA,
        }
    }
}

/// Runs `code` in `rt` and returns the outcome (panics if the block could not run at all).
pub fn run(env: &TestEnv, rt: &mut Runtime, code: &str) -> BlockResult {
    rt.exec(env.block(code), &mut NoHostCalls).unwrap()
}

/// Defines a test that gets a fresh `TestEnv` (in the spirit of ripgrep's `rgtest!`).
#[macro_export]
macro_rules! vistest {
    ($name:ident, |$env:ident| $body:block) => {
        #[test]
        fn $name() {
            let $env = $crate::support::TestEnv::new();
            $body
        }
    };
}

/// Pids of live processes whose command line contains `marker` (zombies excluded).
pub fn pids_with(marker: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !zombie && cmdline.contains(marker) {
            pids.push(pid);
        }
    }
    pids
}

/// Pids of live processes whose working directory is `dir` and whose command line is
/// `vis-worker`'s (launched as `/proc/self/fd/N worker`; zombies excluded): a session's
/// worker processes, which run in its workspace.
pub fn worker_pids_in(dir: &Path) -> Vec<i32> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    pids_with("worker")
        .into_iter()
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            argv.get(1) == Some(&&b"worker"[..])
                && std::fs::read_link(format!("/proc/{pid}/cwd"))
                    .ok()
                    .as_deref()
                    == Some(&*dir)
        })
        .collect()
}

/// Waits until `cond` holds, up to `limit` (returns whether it did).
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
