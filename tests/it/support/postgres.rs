//! A real PostgreSQL server for the tests: one throwaway cluster per run of the test binary,
//! started on first use in a temp dir (Unix socket only, no TCP port), each test on its own
//! database, stopped when the binary exits.
//!
//! The server comes from the distribution's packages (`scripts/test.sh` installs them:
//! `apt-get install postgresql`); its programs are found under `/usr/lib/postgresql/*/bin`
//! (the newest), or `$VIS_TEST_PG_BIN`. It refuses to run as root, so as root the cluster is
//! run as the `postgres` user the package creates. If it cannot be started, every test that
//! needs it fails with the reason: they are never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The running cluster.
pub struct Cluster {
    bin: PathBuf,
    /// Holds `data/` and the server's socket.
    dir: PathBuf,
    /// Run the server's programs as this user (`None`: as ourselves).
    run_as: Option<String>,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// The cluster, started on first use; panics with the reason when it cannot start.
pub fn cluster() -> &'static Cluster {
    match CLUSTER.get_or_init(|| start("shared")) {
        Ok(cluster) => cluster,
        Err(reason) => panic!("PostgreSQL could not be started for the tests: {reason}"),
    }
}

/// A fresh, empty database on the shared cluster; its URL.
pub fn database() -> String {
    cluster().database()
}

fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("VIS_TEST_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| {
            format!("no /usr/lib/postgresql ({e}): install the server (apt-get install postgresql)")
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "no server under /usr/lib/postgresql/*/bin: apt-get install postgresql".into()
    })
}

/// A cluster of the caller's own (for a test that restarts the server), stopped when dropped.
pub fn private_cluster(name: &str) -> Cluster {
    match start(name) {
        Ok(cluster) => cluster,
        Err(reason) => panic!("PostgreSQL could not be started for the test: {reason}"),
    }
}

fn start(name: &str) -> Result<Cluster, String> {
    let bin = bin_dir()?;
    let root = unsafe { libc::geteuid() } == 0;
    let dir = std::env::temp_dir().join(format!("vis-test-pg-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let run_as = if root {
        let out = Command::new("id")
            .args(["-u", "postgres"])
            .output()
            .map_err(|e| format!("id: {e}"))?;
        let uid: u32 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| "running as root and there is no `postgres` user to run the server as (the package creates it)".to_string())?;
        std::os::unix::fs::chown(&dir, Some(uid), None)
            .map_err(|e| format!("cannot give {} to postgres: {e}", dir.display()))?;
        Some("postgres".to_string())
    } else {
        None
    };
    let cluster = Cluster { bin, dir, run_as };
    let data = cluster.dir.join("data");
    cluster.server_command(
        "initdb",
        &[
            "-D",
            data.to_str().unwrap(),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        ],
    )?;
    let options = format!(
        "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
        cluster.dir.display()
    );
    cluster.server_command(
        "pg_ctl",
        &[
            "-D",
            data.to_str().unwrap(),
            "-l",
            cluster.dir.join("server.log").to_str().unwrap(),
            "-o",
            &options,
            "-w",
            "start",
        ],
    )?;
    if name == "shared" {
        // A static is never dropped: the shared cluster stops when the binary exits.
        extern "C" fn stop_at_exit() {
            if let Some(Ok(cluster)) = CLUSTER.get() {
                cluster.stop();
            }
        }
        unsafe { libc::atexit(stop_at_exit) };
    }
    Ok(cluster)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Cluster {
    /// A fresh, empty database; its URL.
    pub fn database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "t{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// The URL of database `name` (over the Unix socket, as the superuser).
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres:///{name}?host={}&user=postgres",
            self.dir.display()
        )
    }

    /// One of the server's programs (`psql`, …).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// Runs one of the server's programs (as the server's user when we are root).
    fn server_command(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let path = self.bin.join(program);
        let mut command = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        let out = command
            .args(args)
            .current_dir(&self.dir)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            return Err(format!(
                "{program} {args:?} failed: {}{}\n{log}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Runs `sql` in database `db` with psql; panics when it fails. Returns psql's output
    /// (unaligned, tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", self.dir.to_str().unwrap(), "-U", "postgres", "-d", db])
            .args(["-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `pg_ctl restart -m fast`: every connection is dropped, the server comes back.
    pub fn restart(&self) {
        let data = self.dir.join("data");
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
            self.dir.display()
        );
        self.server_command(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                self.dir.join("server.log").to_str().unwrap(),
                "-o",
                &options,
                "-m",
                "fast",
                "-w",
                "restart",
            ],
        )
        .unwrap();
    }

    fn stop(&self) {
        let data = self.dir.join("data");
        let _ = self.server_command(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The database name in a URL made by [`database`].
pub fn database_name(url: &str) -> String {
    url.trim_start_matches("postgres:///")
        .split('?')
        .next()
        .unwrap_or_default()
        .to_string()
}
