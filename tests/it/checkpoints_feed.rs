//! The scan after a block looks only at what the change feed names (issue 25 §1's 5 ms):
//! through the real binary, what it records must be what a full walk records — new files
//! the ignore rules exclude are left out, new directories are walked, a file with two names
//! changed through one is recorded under both, deletes and renames are seen.

use std::path::Path;

use crate::support::TestEnv;
use crate::vistest;

fn ok(run: &crate::support::Run) {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}

fn diff(env: &TestEnv, session: &str, key: &str) -> String {
    let run = env.vis(&["diff", session, key]);
    ok(&run);
    run.stdout
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

vistest!(
    the_scan_after_a_block_records_what_a_full_walk_would,
    |env| {
        let ws = env.workspace();
        std::fs::create_dir_all(ws.join("src/deep")).unwrap();
        std::fs::write(ws.join("src/.gitignore"), "*.o\n").unwrap();
        std::fs::write(ws.join("src/deep/kept.txt"), "k0\n").unwrap();
        std::fs::write(ws.join("src/deep/gone.txt"), "g0\n").unwrap();
        std::fs::write(ws.join("src/deep/old.txt"), "o0\n").unwrap();
        ok(&env.exec("f", "print(1)"));
        // t2: edits, a delete, a rename, a new file, a new ignored file (nested rule), a
        // new directory with a file in it.
        ok(&env.exec(
            "f",
            "import os\n\
             open('src/deep/kept.txt', 'w').write('k1\\n')\n\
             os.remove('src/deep/gone.txt')\n\
             os.rename('src/deep/old.txt', 'src/deep/new.txt')\n\
             open('src/deep/made.txt', 'w').write('m\\n')\n\
             open('src/deep/obj.o', 'w').write('object\\n')\n\
             os.makedirs('src/fresh/inner')\n\
             open('src/fresh/inner/n.txt', 'w').write('n\\n')",
        ));
        let t2 = diff(&env, "f", "t2");
        for needle in [
            "src/deep/kept.txt",
            "+k1",
            "src/deep/gone.txt",
            "src/deep/old.txt",
            "src/deep/new.txt",
            "src/deep/made.txt",
            "src/fresh/inner/n.txt",
        ] {
            assert!(t2.contains(needle), "missing {needle:?} in\n{t2}");
        }
        assert!(!t2.contains("obj.o"), "an ignored file was recorded:\n{t2}");
        // t3: the new directory is watched from now on (its first walk named it).
        ok(&env.exec("f", "open('src/fresh/inner/n.txt', 'w').write('n2\\n')"));
        let t3 = diff(&env, "f", "t3");
        assert!(t3.contains("+n2"), "{t3}");
        // And all of it rewinds.
        ok(&env.vis(&["rewind", "f", "t2"]));
        assert_eq!(read(&ws.join("src/deep/kept.txt")), "k0\n");
        assert_eq!(read(&ws.join("src/deep/gone.txt")), "g0\n");
        assert_eq!(read(&ws.join("src/deep/old.txt")), "o0\n");
        assert!(!ws.join("src/deep/new.txt").exists());
        assert!(!ws.join("src/fresh/inner/n.txt").exists());
        assert_eq!(read(&ws.join("src/deep/obj.o")), "object\n");
    }
);

vistest!(
    a_file_with_two_names_written_through_one_is_the_blocks_change_under_both,
    |env| {
        let ws = env.workspace();
        std::fs::create_dir_all(ws.join("a")).unwrap();
        std::fs::create_dir_all(ws.join("b")).unwrap();
        std::fs::write(ws.join("a/one.txt"), "same0\n").unwrap();
        std::fs::hard_link(ws.join("a/one.txt"), ws.join("b/two.txt")).unwrap();
        ok(&env.exec("h", "print(1)"));
        // Written in place through b/two.txt: inotify names only b/.
        ok(&env.exec(
            "h",
            "f = open('b/two.txt', 'r+')\nf.write('same1')\nf.close()",
        ));
        let t2 = diff(&env, "h", "t2");
        assert!(t2.contains("a/one.txt"), "{t2}");
        assert!(t2.contains("b/two.txt"), "{t2}");
        ok(&env.vis(&["rewind", "h", "t2"]));
        assert_eq!(read(&ws.join("a/one.txt")), "same0\n");
    }
);

vistest!(a_changed_ignore_file_makes_the_scan_walk_again, |env| {
    let ws = env.workspace();
    std::fs::write(ws.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(ws.join("app.log"), "l0\n").unwrap();
    ok(&env.exec("g", "print(1)"));
    // The block stops ignoring *.log and changes app.log: both are its changes.
    ok(&env.exec(
        "g",
        "open('.gitignore', 'w').write('')\nopen('app.log', 'w').write('l1\\n')",
    ));
    let t2 = diff(&env, "g", "t2");
    assert!(t2.contains(".gitignore"), "{t2}");
    assert!(t2.contains("app.log"), "{t2}");
});

vistest!(
    a_workspace_over_the_watch_cap_is_walked_in_full_and_records_every_change,
    |env| {
        // The cap is a real setting: 2 directories watched at most, the workspace has 4.
        std::fs::create_dir_all(env.config_dir()).unwrap();
        std::fs::write(
            env.config_dir().join("config.toml"),
            "[checkpoints]\nmax_watched_dirs = 2\n",
        )
        .unwrap();
        let ws = env.workspace();
        for dir in ["a", "b", "c/d"] {
            std::fs::create_dir_all(ws.join(dir)).unwrap();
            std::fs::write(ws.join(dir).join("f.txt"), format!("{dir}0\n")).unwrap();
        }
        ok(&env.exec("w", "print(1)"));
        ok(&env.exec(
            "w",
            "import os\n\
             open('a/f.txt', 'w').write('a1\\n')\n\
             open('c/d/f.txt', 'w').write('d1\\n')\n\
             os.remove('b/f.txt')\n\
             open('c/new.txt', 'w').write('n\\n')",
        ));
        let t2 = diff(&env, "w", "t2");
        for needle in ["a/f.txt", "+a1", "c/d/f.txt", "+d1", "b/f.txt", "c/new.txt"] {
            assert!(t2.contains(needle), "missing {needle:?} in\n{t2}");
        }
        // Below the cap again (two directories left): recorded the same way.
        ok(&env.exec(
            "w",
            "import shutil\nshutil.rmtree('c')\nopen('a/f.txt', 'w').write('a2\\n')",
        ));
        ok(&env.exec("w", "open('b/g.txt', 'w').write('g\\n')"));
        assert!(diff(&env, "w", "t3").contains("c/d/f.txt"));
        assert!(diff(&env, "w", "t4").contains("+g"));
        ok(&env.vis(&["rewind", "w", "t2"]));
        assert_eq!(read(&ws.join("a/f.txt")), "a0\n");
        assert_eq!(read(&ws.join("b/f.txt")), "b0\n");
        assert_eq!(read(&ws.join("c/d/f.txt")), "c/d0\n");
        assert!(!ws.join("c/new.txt").exists());
        assert!(!ws.join("b/g.txt").exists());
    }
);

vistest!(a_bad_watch_cap_is_refused_with_the_setting_named, |env| {
    std::fs::create_dir_all(env.config_dir()).unwrap();
    std::fs::write(
        env.config_dir().join("config.toml"),
        "[checkpoints]\nmax_watched_dirs = -1\n",
    )
    .unwrap();
    std::fs::write(env.workspace().join("f.txt"), "f0\n").unwrap();
    let run = env.exec("x", "open('f.txt', 'w').write('f1\\n')");
    assert_ne!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("max_watched_dirs"), "{}", run.stderr);
    // Nothing ran.
    assert_eq!(read(&env.workspace().join("f.txt")), "f0\n");
});

/// The processes whose command line names `token`.
fn processes_naming(token: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(token) {
            found.push(pid);
        }
    }
    found
}

vistest!(
    vis_exec_hands_its_feed_to_a_child_that_ends_with_it,
    |env| {
        // `vis exec` leaves the feed's teardown to a forked copy of itself (same command
        // line), which must end when `vis exec` does: nothing of it may outlive the command,
        // and the command's output pipes must close with it.
        let ws = env.workspace();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f.txt"), "f0\n").unwrap();
        let session = format!("feed-child-{}", std::process::id());
        ok(&env.exec(&session, "print(1)"));
        ok(&env.exec(&session, "open('a/b/f.txt', 'w').write('f1\\n')"));
        // A new directory: the feed gives up mid-run and a new one is made.
        ok(&env.exec(
            &session,
            "import os\nos.makedirs('a/c')\nopen('a/c/g.txt', 'w').write('g\\n')",
        ));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let left = processes_naming(&session);
            if left.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "processes of `vis exec --session {session}` outlived it: {left:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(diff(&env, &session, "t2").contains("+f1"));
        assert!(diff(&env, &session, "t3").contains("a/c/g.txt"));
    }
);

vistest!(
    the_output_of_vis_exec_ends_when_vis_exec_has_exited,
    |env| {
        // The children that close the feed and the capture file after `vis exec` has exited
        // start with copies of its descriptors: once the process has exited, none may still
        // hold its standard output or error (a reader would see their end only when that
        // child dies, after the feed's slow teardown: 12–21 ms late in a quarter of the runs).
        use std::io::Read;
        use std::os::fd::AsRawFd;
        use std::process::Stdio;
        let ws = env.workspace();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(ws.join("a/b/f.txt"), "f0\n").unwrap();
        for round in 0..8 {
            let mut child = env
                .command(&["exec", "--session", "pipes", &format!("print({round})")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Its output is a few lines: it fits in the pipes, nothing blocks the exit.
            let status = child.wait().unwrap();
            assert!(status.success(), "round {round}: {status}");
            let mut stdout = child.stdout.take().unwrap();
            let mut stderr = child.stderr.take().unwrap();
            let drain = |pipe: &mut dyn Read, fd: i32, name: &str| -> String {
                // SAFETY: fcntl on a descriptor this test owns.
                unsafe {
                    let flags = libc::fcntl(fd, libc::F_GETFL);
                    libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
                let mut text = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) => return String::from_utf8_lossy(&text).into_owned(),
                        Ok(n) => text.extend_from_slice(&buf[..n]),
                        Err(e) => panic!(
                            "round {round}: vis exec has exited but its {name} is still open \
                             ({e}); read so far: {:?}",
                            String::from_utf8_lossy(&text)
                        ),
                    }
                }
            };
            let out_fd = stdout.as_raw_fd();
            let err_fd = stderr.as_raw_fd();
            assert_eq!(
                drain(&mut stdout, out_fd, "standard output"),
                format!("{round}\n")
            );
            drain(&mut stderr, err_fd, "standard error");
        }
    }
);
