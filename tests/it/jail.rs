//! The worker as a jail (issue 21): each test reproduces an attack of the second round
//! through the real `vis` binary and checks that it fails now, as root and (where the rule
//! is about files or sockets) as an unprivileged user. The earlier round is in `sandbox`.
//!
//! Secrets, sockets and homes live outside `/tmp` here: the worker gets a `/tmp` of its own,
//! so anything under the host's `/tmp` is out of its sight anyway and would prove nothing.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::tmux::Tmux;
use crate::support::{vis_bin, wait_until, Run, TestEnv};
use crate::vistest;

/// A directory outside `/tmp` (removed at the end of the test).
fn outside_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// The uid tests drop to for the unprivileged runs.
const NOBODY: u32 = 65534;

/// A user's world outside `/tmp`: a home with credentials, Vis's data and config directories
/// in their default places under it, and a workspace.
struct World {
    dir: tempfile::TempDir,
}

const SECRET_FILES: &[&str] = &[
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".netrc",
    ".config/gh/hosts.yml",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    ".gnupg/private-keys-v1.d/key",
    ".config/vis/config.toml",
    ".config/vis/trusted.toml",
];

impl World {
    fn new() -> World {
        let world = World { dir: outside_tmp() };
        for rel in SECRET_FILES {
            let path = world.home().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            // (TOML files get it as a comment, so Vis can still read its own config.)
            std::fs::write(&path, format!("# secret-{}\n", rel.replace('/', "-"))).unwrap();
        }
        std::fs::write(world.home().join(".bashrc"), "# the user's shell setup\n").unwrap();
        std::fs::create_dir_all(world.workspace()).unwrap();
        std::fs::create_dir_all(world.data_dir()).unwrap();
        // The workspace is trusted in `trusted.toml` (kept beside the secrets above).
        let trusted = format!(
            "# secret-trusted\nworkspaces = [{:?}]\n",
            world.workspace().to_str().unwrap()
        );
        std::fs::write(world.config_dir().join("trusted.toml"), trusted).unwrap();
        world
    }

    fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    fn workspace(&self) -> PathBuf {
        self.path().join("ws")
    }

    fn data_dir(&self) -> PathBuf {
        self.home().join(".local/share/vis")
    }

    fn config_dir(&self) -> PathBuf {
        self.home().join(".config/vis")
    }

    fn db(&self) -> PathBuf {
        self.data_dir().join("vis.db")
    }

    /// `vis ARGS` in this world (its default database under the home) with `HOME` set.
    fn vis(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(vis_bin());
        cmd.args(args)
            .env("HOME", self.home())
            .env("VIS_HOME", self.data_dir())
            .env("VIS_CONFIG_DIR", self.config_dir())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("VIS_CACHE_DIR")
            .stdin(Stdio::null());
        cmd
    }

    /// `vis [GLOBAL…] exec --session SESSION --workspace WORKSPACE CODE`.
    fn exec_in(&self, workspace: &Path, code: &str, global: &[&str]) -> Command {
        self.exec_session(workspace, "s", code, global)
    }

    fn exec_session(
        &self,
        workspace: &Path,
        session: &str,
        code: &str,
        global: &[&str],
    ) -> Command {
        let mut cmd = self.vis(global);
        cmd.args(["exec", "--session", session, "--workspace"])
            .arg(workspace)
            .arg(code)
            .current_dir(workspace);
        cmd
    }

    fn exec(&self, code: &str) -> Run {
        self.exec_in(&self.workspace(), code, &[])
            .output()
            .unwrap()
            .into()
    }

    /// The same, as an unprivileged user who owns the whole world.
    fn exec_as_nobody(&self, code: &str) -> Run {
        chown_nobody(&self.path());
        let cmd = self.exec_in(&self.workspace(), code, &[]);
        as_nobody(cmd).output().unwrap().into()
    }
}

fn chown_nobody(dir: &Path) {
    let status = Command::new("chown")
        .args(["-R", &format!("{NOBODY}:{NOBODY}")])
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success());
    // The directories above must be passable for the unprivileged user.
    let mut up = dir.parent();
    while let Some(p) = up {
        let mode = std::fs::metadata(p).unwrap().permissions().mode();
        if mode & 0o001 == 0 {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o001)).unwrap();
        }
        up = p.parent();
    }
}

/// `cmd` run as uid and gid 65534 with no supplementary groups.
fn as_nobody(cmd: Command) -> Command {
    let mut wrapped = Command::new("setpriv");
    wrapped.args([
        &format!("--reuid={NOBODY}"),
        &format!("--regid={NOBODY}"),
        "--clear-groups",
        "--",
    ]);
    wrapped.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped.stdin(Stdio::null());
    wrapped
}

/// A block that looks for `secret-` everywhere the attacks of the review looked, and prints
/// what it found.
fn secret_hunt(world: &World, extra: &[&Path]) -> String {
    let mut targets: Vec<String> = SECRET_FILES
        .iter()
        .map(|rel| format!("{:?}", world.home().join(rel).to_str().unwrap()))
        .collect();
    for dir in [
        ".ssh",
        ".aws",
        ".config/gh",
        ".config/vis",
        ".local/share/vis",
    ] {
        targets.push(format!("{:?}", world.home().join(dir).to_str().unwrap()));
    }
    for path in extra {
        targets.push(format!("{:?}", path.to_str().unwrap()));
    }
    targets.push("'/etc/shadow'".into());
    format!(
        r#"
import os
found = []
def scan(path):
    if os.path.isdir(path):
        for root, dirs, files in os.walk(path):
            for f in files:
                scan(os.path.join(root, f))
        return
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError:
        return
    if b'secret-' in data or (path == '/etc/shadow' and data):
        found.append(path)
for p in [{targets}]:
    scan(p)
# The whole home, as a block that goes looking would.
scan({home:?})
print('found', sorted(set(found)))
"#,
        targets = targets.join(", "),
        home = world.home().to_str().unwrap(),
    )
}

fn assert_nothing_found(run: &Run) {
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("found []"), "{}", run.stdout);
}

vistest!(
    a_block_cannot_read_the_users_keys_or_vis_own_files,
    |_env| {
        let world = World::new();
        // A first block creates the session (and so the database under the data directory).
        let first = world.exec("print('hi')");
        assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
        assert!(world.db().exists());
        let run = world.exec(&secret_hunt(&world, &[&world.db()]));
        assert_nothing_found(&run);
        // The files are there for the host all along.
        for rel in SECRET_FILES {
            assert!(std::fs::read_to_string(world.home().join(rel))
                .unwrap()
                .starts_with("# secret-"));
        }
    }
);

vistest!(
    a_database_elsewhere_and_what_lies_beside_it_are_hidden,
    |_env| {
        let world = World::new();
        let store = world.path().join("store");
        std::fs::create_dir_all(&store).unwrap();
        let db = store.join("team.db");
        std::fs::write(store.join("serve-token"), "secret-token\n").unwrap();
        let db_flag = db.to_str().unwrap();
        let exec = |session: &str, code: &str| -> Run {
            world
                .exec_session(&world.workspace(), session, code, &["--db", db_flag])
                .output()
                .unwrap()
                .into()
        };
        // Another session of the same store, with a full output kept as an artifact.
        let other = exec("other", "print('secret-other-session ' * 2000)");
        assert_eq!(other.code, 0, "{}", other.stderr);
        assert!(store.join("artifacts/other").is_dir());
        let run = exec("s", &secret_hunt(&world, &[&store]));
        assert_nothing_found(&run);
    }
);

#[test]
fn an_unprivileged_user_cannot_read_their_keys_either() {
    let world = World::new();
    let code = secret_hunt(&world, &[]);
    let run = world.exec_as_nobody(&code);
    assert_nothing_found(&run);
}

vistest!(
    allow_read_shows_a_hidden_path_again_and_hide_adds_one,
    |_env| {
        let world = World::new();
        std::fs::write(world.home().join(".ssh/known_hosts"), "host-key\n").unwrap();
        std::fs::create_dir_all(world.home().join("notes")).unwrap();
        std::fs::write(world.home().join("notes/plan.txt"), "private plan\n").unwrap();
        std::fs::write(
            world.config_dir().join("config.toml"),
            "[sandbox]\nallow_read = [\"~/.ssh/known_hosts\", \"~/.aws\"]\nhide = [\"~/notes\"]\n",
        )
        .unwrap();
        let code = "import os\nprint(open(os.path.expanduser('~/.ssh/known_hosts')).read().strip())\nprint(sorted(os.listdir(os.path.expanduser('~/.ssh'))))\nprint(open(os.path.expanduser('~/.aws/credentials')).read().strip())\nprint(os.listdir(os.path.expanduser('~/notes')))";
        let run = world.exec(code);
        assert_eq!(
            run.stdout, "host-key\n['known_hosts']\n# secret-.aws-credentials\n[]\n",
            "{}",
            run.stderr
        );
        // `vis sandbox status` lists what is hidden.
        let mut cmd = world.vis(&["sandbox", "status"]);
        let status: Run = cmd.output().unwrap().into();
        assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
        let notes = world.home().join("notes");
        for line in [
            "read-only root    yes",
            "private /tmp      yes",
            "no terminal       yes",
            "capabilities      none",
            "unix sockets      off",
        ] {
            assert!(status.stdout.contains(line), "{line}: {}", status.stdout);
        }
        for hidden in [
            world.home().join(".ssh"),
            world.home().join(".config/gh"),
            world.config_dir(),
            notes,
        ] {
            assert!(
                status.stdout.contains(hidden.to_str().unwrap()),
                "{}: {}",
                hidden.display(),
                status.stdout
            );
        }
    }
);

vistest!(a_bad_hide_or_allow_read_entry_is_a_clear_error, |env| {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        "[sandbox]\nhide = [\"relative/path\"]\n",
    )
    .unwrap();
    let run = env.exec("s", "print(1)");
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("sandbox.hide") && run.stderr.contains("not an absolute path"),
        "{}",
        run.stderr
    );
    assert!(!env.db().exists());
});

// Sockets and terminals outside the sandbox.

vistest!(no_socket_outside_the_workspace_can_be_reached, |_env| {
    let world = World::new();
    let sock = world.path().join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    listener.set_nonblocking(true).unwrap();
    // A real tmux server of the user's, on a socket outside the workspace.
    let tmux_sock = world.path().join("tmux.sock");
    let started = Command::new("tmux")
        .arg("-S")
        .arg(&tmux_sock)
        .args(["new-session", "-d", "-s", "user", "sleep 600"])
        .status()
        .unwrap();
    assert!(started.success());
    let pwned = world.home().join("pwned");
    let code = format!(
        r#"
import socket
for target in [{sock:?}, {tmux:?}]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(target)
        print('connected', target)
    except OSError as e:
        print('refused', e.strerror)
r = sh("tmux -S {tmux} new-window -d 'touch {pwned}'")
print('tmux exit', r.exit_code)
"#,
        sock = sock.to_str().unwrap(),
        tmux = tmux_sock.to_str().unwrap(),
        pwned = pwned.to_str().unwrap(),
    );
    let run = world.exec(&code);
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(&tmux_sock)
        .arg("kill-server")
        .status();
    assert!(
        run.stdout
            .starts_with("refused Operation not permitted\nrefused Operation not permitted\n"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert!(!run.stdout.contains("tmux exit 0"), "{}", run.stdout);
    assert!(!pwned.exists());
    assert!(listener.accept().is_err(), "nothing connected");
});

vistest!(
    allowed_unix_sockets_work_in_the_workspace_but_not_in_the_hosts_tmp,
    |env| {
        std::fs::create_dir_all(env.config_dir()).unwrap();
        std::fs::write(
            env.config_dir().join("config.toml"),
            "[sandbox]\nallow_unix_sockets = true\n",
        )
        .unwrap();
        // The host's /tmp (where the test's own files are) is not in the worker's view.
        let host_sock = env.path().join("host.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&host_sock).unwrap();
        let code = format!(
            "import socket\nsrv = socket.socket(socket.AF_UNIX)\nsrv.bind('own.sock')\nsrv.listen()\nc = socket.socket(socket.AF_UNIX)\nc.connect('own.sock')\nprint('own ok')\ntry:\n    socket.socket(socket.AF_UNIX).connect({:?})\n    print('host reached')\nexcept OSError as e:\n    print('host', e.strerror)",
            host_sock.to_str().unwrap()
        );
        let run = env.exec("u", &code);
        assert_eq!(
            run.stdout, "own ok\nhost No such file or directory\n",
            "{}",
            run.stderr
        );
    }
);

#[test]
fn a_block_cannot_type_into_the_users_terminal() {
    let world = World::new();
    let pwned = world.home().join("pwned-by-tiocsti");
    // Every way the review found or could think of: the controlling terminal, the standard
    // descriptors, every pty the block can see, and a pty of its own.
    let block = format!(
        r#"
import fcntl, os, termios, pty
payload = b"touch {pwned}\n"
tried = []
def inject(fd, what):
    try:
        for ch in payload:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
        tried.append(what + ':typed')
    except OSError as e:
        tried.append(what + ':' + e.strerror)
try:
    fd = os.open('/dev/tty', os.O_RDWR)
    inject(fd, 'tty')
except OSError as e:
    tried.append('tty:' + e.strerror)
for fd in (0, 1, 2):
    inject(fd, 'fd%d' % fd)
for name in os.listdir('/dev/pts'):
    try:
        inject(os.open('/dev/pts/' + name, os.O_RDWR), 'pts/' + name)
    except OSError as e:
        tried.append('pts/%s:%s' % (name, e.strerror))
master, slave = pty.openpty()
inject(slave, 'own')
print(' '.join(tried))
"#,
        pwned = pwned.to_str().unwrap()
    );
    let script = world.path().join("attack.py");
    std::fs::write(&script, block).unwrap();
    let ws = world.workspace();
    let env = [
        ("HOME", world.home().to_str().unwrap().to_string()),
        ("VIS_HOME", world.data_dir().to_str().unwrap().to_string()),
        (
            "VIS_CONFIG_DIR",
            world.config_dir().to_str().unwrap().to_string(),
        ),
        ("PS1", "$ ".to_string()),
    ];
    // The user's interactive shell in a real terminal; vis exec runs from it.
    let tmux = Tmux::start(&ws, &env, Path::new("/bin/sh"), &[]);
    let line = format!(
        "{} exec --session t --workspace {} - < {} > {}/out.txt 2>&1; echo finished-$?",
        vis_bin().display(),
        ws.display(),
        script.display(),
        world.path().display()
    );
    tmux.send_line(&line);
    // (The typed line holds `finished-$?`; only the shell's answer holds a digit there.)
    tmux.wait_for("vis exec to finish", |screen| {
        screen.contains("finished-0") || screen.contains("finished-1")
    });
    // Whatever was typed would run now, at the shell's prompt.
    tmux.send_line("echo prompt-$((20+22))");
    tmux.wait_for("the shell", |screen| screen.contains("prompt-42"));
    let out = std::fs::read_to_string(world.path().join("out.txt")).unwrap();
    assert!(!pwned.exists(), "typed into the shell: {out}");
    assert!(!out.contains(":typed"), "{out}");
    assert!(out.contains("tty:No such device or address"), "{out}");
    assert!(out.contains("own:Operation not permitted"), "{out}");
    // Only the pty the block opened itself exists in its /dev/pts.
    assert!(!out.contains("pts/1:"), "{out}");
}

// Files the user's tools run later, and Vis's own settings.

vistest!(
    a_block_cannot_plant_git_hooks_or_workspace_mcp_commands,
    |_env| {
        let world = World::new();
        let ws = world.workspace();
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(&ws)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(&["init", "-q"]);
        std::fs::create_dir_all(ws.join(".vis")).unwrap();
        std::fs::write(ws.join(".vis/mcp.toml"), "# no servers\n").unwrap();
        let config_before = std::fs::read(ws.join(".git/config")).unwrap();
        let code = r#"
import os
for path in ['.git/hooks/pre-commit', '.git/config', '.vis/mcp.toml', '.vis/extensions/evil.py']:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'a') as f:
            f.write('\n[core]\n\thooksPath = /tmp/h\n')
        print('wrote', path)
    except OSError as e:
        print(path, e.strerror)
for src, dst in [('.git', 'moved-git'), ('.vis', 'moved-vis')]:
    try:
        os.rename(src, dst)
        print('moved', src)
    except OSError as e:
        print(src, e.strerror)
r = sh('git config core.hooksPath /tmp/hooks')
print('git config exit', r.code)
open('src.txt', 'w').write('the work itself is writable')
"#;
        let run = world.exec(code);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(!run.stdout.contains("wrote"), "{}", run.stdout);
        assert!(!run.stdout.contains("moved"), "{}", run.stdout);
        assert!(!run.stdout.contains("git config exit 0"), "{}", run.stdout);
        assert_eq!(
            std::fs::read(ws.join(".git/config")).unwrap(),
            config_before
        );
        assert!(!ws.join(".git/hooks/pre-commit").exists());
        assert!(!ws.join(".vis/extensions/evil.py").exists());
        assert!(ws.join("src.txt").exists());
    }
);

vistest!(
    with_the_home_as_workspace_vis_settings_and_trust_stay_out_of_reach,
    |_env| {
        let world = World::new();
        let config = world.config_dir().join("config.toml");
        std::fs::write(&config, "# secret-config: the user's own\n").unwrap();
        let trusted_before = std::fs::read(world.config_dir().join("trusted.toml")).unwrap();
        let code = format!(
            r#"
import os
for path in [{config:?}, {trusted:?}]:
    try:
        with open(path, 'w') as f:
            f.write('[sandbox]\nmode = "off"\n')
        print('wrote', path)
    except OSError as e:
        print('refused', e.strerror)
print(os.listdir({dir:?}))
open('in-home.txt', 'w').write('the home itself is the workspace')
"#,
            config = config.to_str().unwrap(),
            trusted = world.config_dir().join("trusted.toml").to_str().unwrap(),
            dir = world.config_dir().to_str().unwrap(),
        );
        // The whole home is the workspace (and so, for its own code, trusted).
        let home = world.home();
        let mut trust = world.vis(&["trust", home.to_str().unwrap()]);
        assert!(trust.status().unwrap().success());
        let trusted_before = {
            let _ = trusted_before;
            std::fs::read(world.config_dir().join("trusted.toml")).unwrap()
        };
        let run: Run = world.exec_in(&home, &code, &[]).output().unwrap().into();
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(!run.stdout.contains("wrote"), "{}", run.stdout);
        assert!(run.stdout.contains("[]\n"), "hidden: {}", run.stdout);
        assert_eq!(
            std::fs::read_to_string(&config).unwrap(),
            "# secret-config: the user's own\n"
        );
        assert_eq!(
            std::fs::read(world.config_dir().join("trusted.toml")).unwrap(),
            trusted_before
        );
        assert!(home.join("in-home.txt").exists());
    }
);

fn metadata_attack(world: &World) -> String {
    format!(
        r#"
import os
ssh, rc = {ssh:?}, {rc:?}
for what, f in [
    ('chmod', lambda: os.chmod(ssh, 0o777)),
    ('utime', lambda: os.utime(rc, (0, 0))),
    ('setxattr', lambda: os.setxattr(rc, 'user.vis', b'x')),
    ('chown', lambda: os.chown(rc, os.getuid(), os.getgid())),
    ('truncate', lambda: os.truncate(rc, 0)),
]:
    try:
        f()
        print(what, 'changed')
    except OSError as e:
        print(what, 'refused')
"#,
        ssh = world.home().join(".ssh").to_str().unwrap(),
        rc = world.home().join(".bashrc").to_str().unwrap(),
    )
}

fn assert_metadata_kept(world: &World, run: &Run, ssh_mode: u32, rc_mtime: std::time::SystemTime) {
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains("changed"), "{}", run.stdout);
    assert_eq!(run.stdout.matches("refused").count(), 5, "{}", run.stdout);
    let ssh = std::fs::metadata(world.home().join(".ssh")).unwrap();
    assert_eq!(ssh.permissions().mode() & 0o777, ssh_mode);
    let rc = std::fs::metadata(world.home().join(".bashrc")).unwrap();
    assert_eq!(rc.modified().unwrap(), rc_mtime);
    assert_eq!(rc.len(), "# the user's shell setup\n".len() as u64);
}

vistest!(metadata_outside_the_workspace_cannot_change, |_env| {
    let world = World::new();
    let ssh_mode = std::fs::metadata(world.home().join(".ssh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    let mtime = std::fs::metadata(world.home().join(".bashrc"))
        .unwrap()
        .modified()
        .unwrap();
    let run = world.exec(&metadata_attack(&world));
    assert_metadata_kept(&world, &run, ssh_mode, mtime);
});

#[test]
fn an_unprivileged_user_cannot_change_metadata_outside_either() {
    let world = World::new();
    chown_nobody(&world.path());
    let ssh_mode = std::fs::metadata(world.home().join(".ssh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    let mtime = std::fs::metadata(world.home().join(".bashrc"))
        .unwrap()
        .modified()
        .unwrap();
    let run = world.exec_as_nobody(&metadata_attack(&world));
    assert_metadata_kept(&world, &run, ssh_mode, mtime);
}

#[test]
fn an_unprivileged_user_meets_the_same_walls() {
    let world = World::new();
    let ws = world.workspace();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(git.success());
    let sock = world.path().join("user.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let code = format!(
        r#"
import os, socket, json
print('uid', os.getuid())
checks = {{}}
def attempt(name, f):
    try:
        f()
        checks[name] = 'allowed'
    except OSError as e:
        checks[name] = e.strerror
attempt('git hook', lambda: open('.git/hooks/pre-commit', 'w'))
attempt('socket', lambda: socket.socket(socket.AF_UNIX).connect({sock:?}))
attempt('tty', lambda: open('/dev/tty'))
attempt('outside', lambda: open({outside:?}, 'w'))
attempt('workspace', lambda: open('ok.txt', 'w'))
attempt('tmp', lambda: open('/tmp/mine', 'w'))
print(json.dumps(checks, sort_keys=True))
print(sorted(set(l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap'))))
"#,
        sock = sock.to_str().unwrap(),
        outside = world.home().join("planted").to_str().unwrap(),
    );
    let run = world.exec_as_nobody(&code);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut lines = run.stdout.lines();
    assert_eq!(lines.next(), Some("uid 65534"));
    let checks: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        checks,
        serde_json::json!({
            "git hook": "Read-only file system",
            "socket": "Operation not permitted",
            "tty": "No such device or address",
            "outside": "Read-only file system",
            "workspace": "allowed",
            "tmp": "allowed",
        })
    );
    assert_eq!(lines.next(), Some("['0000000000000000']"));
    assert!(!world.home().join("planted").exists());
}

// Temp space.

vistest!(
    tmp_and_shared_memory_are_the_workers_own_in_every_mode,
    |env| {
        let marker = format!("vis-private-{}", std::process::id());
        for mode in ["workspace-write", "read-only"] {
            // (The test's own workspace is under /tmp: its mount point is there too.)
            let code = format!(
            "import os, stat\nfor d in ['/tmp', '/var/tmp', '/dev/shm']:\n    open(os.path.join(d, {marker:?}), 'w').write('x')\n    print(d, oct(stat.S_IMODE(os.stat(d).st_mode)), [n for n in os.listdir(d) if not n.startswith('.tmp')])\nprint(os.environ['TMPDIR'])"
        );
            let run = env.vis(&[
                "exec",
                "--session",
                mode,
                "--sandbox",
                mode,
                "--workspace",
                env.workspace().to_str().unwrap(),
                &code,
            ]);
            assert_eq!(
            run.stdout,
            format!("/tmp 0o700 ['{marker}']\n/var/tmp 0o700 ['{marker}']\n/dev/shm 0o700 ['{marker}']\n/tmp\n"),
            "{mode}: {}",
            run.stderr
        );
            for dir in ["/tmp", "/var/tmp", "/dev/shm"] {
                assert!(!Path::new(dir).join(&marker).exists(), "{mode}: {dir}");
            }
        }
    }
);

vistest!(the_private_tmp_is_size_capped, |env| {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        "[sandbox]\ntmp_size_mb = 2\n",
    )
    .unwrap();
    let code = "try:\n    open('/tmp/big', 'wb').write(b'x' * (3 << 20))\n    print('wrote')\nexcept OSError as e:\n    print(e.strerror)";
    let run = env.exec("c", code);
    assert_eq!(run.stdout, "No space left on device\n", "{}", run.stderr);
});

// Root without a user namespace.

vistest!(root_keeps_no_capability_and_no_way_around_the_view, |env| {
    let code = r#"
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
caps = {l.split(':')[0]: l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')}
print('caps', sorted(set(caps.values())))
def call(name, nr, *args):
    r = libc.syscall(nr, *args)
    if r == 0 and name.startswith('clone'):
        os._exit(0)
    print(name, 'ok' if r >= 0 else errno.errorcode[ctypes.get_errno()])
SYS = dict(clone=56, clone3=435, unshare=272, chroot=161, mknod=133, sethostname=170,
           setdomainname=171, settimeofday=164, clock_settime=227, syslog=103,
           fanotify_init=300, open_by_handle_at=304, io_uring_setup=425, mount=165)
call('clone', SYS['clone'], 0x10000000 | 17, 0, 0, 0, 0)
call('clone_newns', SYS['clone'], 0x00020000 | 17, 0, 0, 0, 0)
call('clone3', SYS['clone3'], 0, 0)
call('unshare', SYS['unshare'], 0x10000000)
call('chroot', SYS['chroot'], b'/')
call('mknod', SYS['mknod'], b'/tmp/vda', 0o60600, os.makedev(254, 0))
call('sethostname', SYS['sethostname'], b'pwned', 5)
call('setdomainname', SYS['setdomainname'], b'pwned', 5)
call('settimeofday', SYS['settimeofday'], None, None)
call('clock_settime', SYS['clock_settime'], 0, None)
call('syslog', SYS['syslog'], 3, None, 0)
call('fanotify_init', SYS['fanotify_init'], 0, 0)
call('open_by_handle_at', SYS['open_by_handle_at'], -100, None, 0)
call('io_uring_setup', SYS['io_uring_setup'], 8, None)
call('mount', SYS['mount'], b'none', b'/tmp', b'tmpfs', 0, None)
# The x32 ABI (bit 30 set): refused by the filter on a kernel that serves it, by the kernel
# on one that does not.
call('x32_unshare', 0x40000000 | SYS['unshare'], 0x10000000)
for path in ['/proc/sys/kernel/core_pattern', '/proc/sys/kernel/hostname']:
    try:
        open(path, 'w').write('|/tmp/x')
        print(path, 'written')
    except OSError as e:
        print(path, e.strerror)
print('masked', [f for f in ['/proc/kcore', '/proc/keys', '/proc/timer_list'] if os.path.exists(f) and open(f, 'rb').read(16)])
print('devices', sorted(os.listdir('/dev')))
"#;
    let run = env.exec("r", code);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let expect = "caps ['0000000000000000']\n\
clone EPERM\n\
clone_newns EPERM\n\
clone3 ENOSYS\n\
unshare EPERM\n\
chroot EPERM\n\
mknod EPERM\n\
sethostname EPERM\n\
setdomainname EPERM\n\
settimeofday EPERM\n\
clock_settime EPERM\n\
syslog EPERM\n\
fanotify_init EPERM\n\
open_by_handle_at EPERM\n\
io_uring_setup EPERM\n\
mount EPERM\n\
x32_unshare ENOSYS\n\
/proc/sys/kernel/core_pattern Read-only file system\n\
/proc/sys/kernel/hostname Read-only file system\n\
masked []\n\
devices ['fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero']\n";
    assert_eq!(run.stdout, expect, "{}", run.stderr);
    // Threads and subprocesses still start (clone3 falls back to clone).
    let run = env.exec(
        "r",
        "import threading, subprocess\nt = threading.Thread(target=print, args=('thread',))\nt.start(); t.join()\nprint(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip())",
    );
    assert!(
        run.stdout.ends_with("thread\nchild\n"),
        "{}{}",
        run.stdout,
        run.stderr
    );
});

// The output capture: read by the host only through its own descriptor.

fn exec_with_deadline(env: &TestEnv, session: &str, code: &str, vars: &[(&str, &str)]) -> Run {
    let mut cmd = env.command(&[
        "exec",
        "--session",
        session,
        "--workspace",
        env.workspace().to_str().unwrap(),
        code,
    ]);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let finished = wait_until(Duration::from_secs(60), || {
        child.try_wait().unwrap().is_some()
    });
    if !finished {
        let _ = child.kill();
        panic!("vis exec hung");
    }
    child.wait_with_output().unwrap().into()
}

vistest!(a_swapped_capture_file_never_shows_host_data, |env| {
    let secret = [("OPENAI_API_KEY", "sk-secret-capture-1")];
    let attacks = [
        // The review's attack: the capture file replaced by a link to the host's environment.
        "import os\ncap = os.readlink('/proc/self/fd/1')\nprint('capture', cap)\ntry:\n    os.unlink(cap)\n    os.symlink('/proc/self/environ', cap)\nexcept OSError as e:\n    print('swap', e.strerror)\nos._exit(3)",
        // The same through the worker's descriptors: a FIFO, /dev/zero.
        "import os\nos.mkfifo('fifo')\nfd = os.open('fifo', os.O_RDWR)\nos.dup2(fd, 1)\nos.dup2(fd, 2)\nos._exit(3)",
        "import os\nfd = os.open('/dev/zero', os.O_RDONLY)\nfor n in range(3, 64):\n    try:\n        os.dup2(fd, n)\n    except OSError:\n        pass\nos.dup2(fd, 1)\nos.dup2(fd, 2)\nos._exit(3)",
    ];
    for (n, attack) in attacks.iter().enumerate() {
        let session = format!("cap{n}");
        let run = exec_with_deadline(&env, &session, attack, &secret);
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(!run.stdout.contains("sk-secret"), "{}", run.stdout);
        assert!(run.stdout.len() < 10_000, "{}", &run.stdout[..500]);
        let export = env.vis(&["sessions", "export", &session]);
        assert!(
            !export.stdout.contains("sk-secret"),
            "stored: {}",
            export.stdout
        );
        let _ = std::fs::remove_file(env.workspace().join("fifo"));
    }
});

vistest!(one_session_cannot_see_another_sessions_output, |env| {
    let marker = format!("live-output-{}", std::process::id());
    let ws = env.workspace();
    let mut victim = env
        .command(&[
            "exec",
            "--session",
            "victim",
            "--workspace",
            ws.to_str().unwrap(),
            &format!("import time\nprint({marker:?}, flush=True)\nopen('victim-started', 'w')\ntime.sleep(20)"),
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The victim's block is running and has printed.
    assert!(wait_until(Duration::from_secs(30), || ws
        .join("victim-started")
        .exists()));
    let code = format!(
        r#"
import os
import stat
hits = []
def look(p):
    try:
        if not stat.S_ISREG(os.stat(p).st_mode):
            return
        if {marker:?}.encode() in open(p, 'rb').read(1 << 20):
            hits.append(p)
    except OSError:
        pass
for top in ['/tmp', '/var/tmp', '/dev/shm']:
    for root, dirs, files in os.walk(top):
        for f in files:
            look(os.path.join(root, f))
# Every descriptor of every process this block can see (the capture files were there).
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    try:
        fds = os.listdir('/proc/%s/fd' % pid)
    except OSError:
        continue
    for fd in fds:
        look('/proc/%s/fd/%s' % (pid, fd))
print('hits', hits)
"#
    );
    let run = env.exec("attacker", &code);
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        run.stdout.contains("hits []"),
        "{}{}",
        run.stdout,
        run.stderr
    );
});

// The host's temp directory for its worker.

/// `vis exec` of `code` in session `sandbox` under that sandbox mode, with `host_tmp` as the
/// host's TMPDIR, left running.
fn exec_in_background(
    env: &TestEnv,
    sandbox: &str,
    code: &str,
    host_tmp: &Path,
) -> std::process::Child {
    env.command(&[
        "exec",
        "--session",
        sandbox,
        "--sandbox",
        sandbox,
        "--workspace",
        env.workspace().to_str().unwrap(),
        code,
    ])
    .env("TMPDIR", host_tmp)
    .stdout(Stdio::null())
    .spawn()
    .unwrap()
}

vistest!(a_worker_with_its_own_tmp_leaves_none_in_the_hosts, |env| {
    // A worker whose view gives it a private `/tmp` never uses the directory the host made
    // for it (it cannot even see it): the host removes it once the worker says so, before
    // the block runs. A worker without a view keeps it as its TMPDIR for as long as it runs.
    let host_tmp = env.path().join("host-tmp");
    std::fs::create_dir_all(&host_tmp).unwrap();
    for sandbox in ["workspace-write", "off"] {
        let started = env.workspace().join(format!("started-{sandbox}"));
        let go = env.workspace().join(format!("go-{sandbox}"));
        let code = format!(
            "import os, time\nopen('{}', 'w').write(os.environ['TMPDIR'])\nwhile not os.path.exists('{}'):\n    time.sleep(0.01)",
            started.display(),
            go.display()
        );
        let mut host = exec_in_background(&env, sandbox, &code, &host_tmp);
        assert!(wait_until(Duration::from_secs(30), || started.exists()));
        let worker_tmp = std::fs::read_to_string(&started).unwrap();
        let listed: Vec<PathBuf> = std::fs::read_dir(&host_tmp)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        if worker_tmp == "/tmp" {
            assert!(listed.is_empty(), "{sandbox}: {listed:?}");
        } else {
            // No view (`off`, or a kernel without namespaces): the host's directory it is.
            assert_eq!(listed, [PathBuf::from(&worker_tmp)], "{sandbox}");
        }
        std::fs::write(&go, "").unwrap();
        assert!(host.wait().unwrap().success(), "{sandbox}");
        let left: Vec<_> = std::fs::read_dir(&host_tmp).unwrap().flatten().collect();
        assert!(left.is_empty(), "{sandbox}: {left:?}");
    }
});

// Leftovers of a killed host.

vistest!(a_killed_host_leaves_no_files_behind, |env| {
    let host_tmp = env.path().join("host-tmp");
    std::fs::create_dir_all(&host_tmp).unwrap();
    for sandbox in ["workspace-write", "off"] {
        let code = format!("import time\nopen('started-{sandbox}', 'w')\ntime.sleep(60)");
        let mut host = exec_in_background(&env, sandbox, &code, &host_tmp);
        let started = env.workspace().join(format!("started-{sandbox}"));
        assert!(wait_until(Duration::from_secs(30), || started.exists()));
        // The block is running; the host dies without a chance to clean up.
        let listed: Vec<_> = std::fs::read_dir(&host_tmp).unwrap().flatten().collect();
        assert!(
            listed
                .iter()
                .all(|e| e.file_name().to_string_lossy().starts_with("vis-tmp-")),
            "{listed:?}"
        );
        host.kill().unwrap();
        host.wait().unwrap();
    }
    // The next start sweeps what the dead hosts left.
    let run = env
        .command(&[
            "exec",
            "--session",
            "next",
            "--workspace",
            env.workspace().to_str().unwrap(),
            "print('ok')",
        ])
        .env("TMPDIR", &host_tmp)
        .output()
        .unwrap();
    assert!(run.status.success());
    let left: Vec<_> = std::fs::read_dir(&host_tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "{left:?}");
});
