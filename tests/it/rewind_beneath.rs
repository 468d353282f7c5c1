//! A rewind writes only beneath the workspace root, following no symbolic link on the way
//! (issue 25 §2): a directory of the workspace swapped for a link to somewhere else before a
//! rewind makes the rewind refuse that file, write nothing outside, and change nothing at
//! all (all or nothing).

use std::path::Path;

use crate::vistest;

fn ok(run: &crate::support::Run) {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

vistest!(
    a_directory_swapped_for_a_link_outside_makes_the_rewind_refuse,
    |env| {
        let ws = env.workspace();
        let outside = env.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/a.txt"), "a0\n").unwrap();
        std::fs::write(ws.join("top.txt"), "t0\n").unwrap();
        ok(&env.exec("s", "print(1)"));
        ok(&env.exec(
            "s",
            "open('sub/a.txt', 'w').write('a1\\n')\nopen('top.txt', 'w').write('t1\\n')",
        ));
        // Another local process moves sub/ away and puts a link to outside/ in its place.
        std::fs::write(outside.join("a.txt"), "a1\n").unwrap();
        std::fs::rename(ws.join("sub"), env.path().join("sub.moved")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("sub")).unwrap();

        // Even --force (which overwrites files changed outside Vis) does not write there.
        let refused = env.vis(&["rewind", "s", "t2", "--force"]);
        assert_ne!(refused.code, 0, "{}\n{}", refused.stdout, refused.stderr);
        for needle in ["sub", "symbolic link", "nothing was changed"] {
            assert!(
                refused.stderr.contains(needle),
                "missing {needle:?} in\n{}",
                refused.stderr
            );
        }
        // Nothing written outside, nothing left there, and nothing changed inside.
        assert_eq!(names(&outside), vec!["a.txt".to_string()]);
        assert_eq!(read(&outside.join("a.txt")), "a1\n");
        assert_eq!(read(&ws.join("top.txt")), "t1\n");
        assert!(ws.join("sub").symlink_metadata().unwrap().is_symlink());
        assert!(!names(&ws).iter().any(|n| n.starts_with(".vis-rewind")));
        let store = vis::store::open(&env.db()).unwrap();
        assert_eq!(store.counts("s").unwrap().turns, 2);

        // With the directory back, the same rewind goes through.
        std::fs::remove_file(ws.join("sub")).unwrap();
        std::fs::rename(env.path().join("sub.moved"), ws.join("sub")).unwrap();
        ok(&env.vis(&["rewind", "s", "t2", "--force"]));
        assert_eq!(read(&ws.join("sub/a.txt")), "a0\n");
        assert_eq!(read(&ws.join("top.txt")), "t0\n");
        assert_eq!(read(&outside.join("a.txt")), "a1\n");
    }
);

vistest!(
    a_link_planted_in_the_workspace_makes_a_fork_copy_refuse_and_write_nothing_outside,
    |env| {
        let ws = env.workspace();
        let outside = env.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/a.txt"), "a0\n").unwrap();
        ok(&env.exec("s", "print(1)"));
        ok(&env.exec("s", "open('sub/a.txt', 'w').write('a1\\n')"));
        // Another local process puts a link to outside/ where sub/ was: the copy of the
        // workspace holds that link, and a/txt as of t1 would be written through it.
        std::fs::write(outside.join("a.txt"), "theirs\n").unwrap();
        std::fs::rename(ws.join("sub"), env.path().join("sub.moved")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("sub")).unwrap();

        let dir = env.path().join("forked");
        let fork = env.vis(&[
            "sessions",
            "fork",
            "s",
            "--at",
            "t1",
            "--workspace",
            dir.to_str().unwrap(),
        ]);
        assert_ne!(fork.code, 0, "{}\n{}", fork.stdout, fork.stderr);
        for needle in ["sub", "symbolic link", "a.txt"] {
            assert!(
                fork.stderr.contains(needle),
                "missing {needle:?} in\n{}",
                fork.stderr
            );
        }
        // Nothing written or removed outside; no copy and no new session left behind.
        assert_eq!(names(&outside), vec!["a.txt".to_string()]);
        assert_eq!(read(&outside.join("a.txt")), "theirs\n");
        assert!(!dir.exists());
        let listed = env.vis(&["sessions", "list"]);
        assert_eq!(listed.stdout.lines().count(), 2, "{}", listed.stdout);

        // With the directory back, the same fork goes through.
        std::fs::remove_file(ws.join("sub")).unwrap();
        std::fs::rename(env.path().join("sub.moved"), ws.join("sub")).unwrap();
        ok(&env.vis(&[
            "sessions",
            "fork",
            "s",
            "--at",
            "t1",
            "--workspace",
            dir.to_str().unwrap(),
        ]));
        assert_eq!(read(&dir.join("sub/a.txt")), "a0\n");
        assert_eq!(read(&ws.join("sub/a.txt")), "a1\n");
    }
);

vistest!(
    a_removal_whose_directory_is_gone_is_done_and_makes_no_directory,
    |env| {
        let ws = env.workspace();
        std::fs::write(ws.join("keep.txt"), "k0\n").unwrap();
        ok(&env.exec("r", "print(1)"));
        ok(&env.exec(
            "r",
            "import os\nos.makedirs('made/deep')\nopen('made/deep/new.txt', 'w').write('n\\n')\nopen('keep.txt', 'w').write('k1\\n')",
        ));
        // The rewind is planned (it will remove made/deep/new.txt, which the session
        // created); then, before it runs, another process removes the whole directory.
        let roots = vec![ws.to_string_lossy().into_owned()];
        let mut recorder = vis::checkpoints::Recorder::new(
            &env.db(),
            "r",
            &roots,
            vis::checkpoints::CheckpointSettings::default(),
        );
        let plan =
            vis::checkpoints::plan_rewind(&mut recorder, vis::checkpoints::Point::BeforeTurn(2), 3)
                .unwrap();
        assert!(
            plan.targets
                .iter()
                .any(|(p, state)| p.ends_with("made/deep/new.txt") && state.is_none()),
            "{:?}",
            plan.targets
        );
        std::fs::remove_dir_all(ws.join("made")).unwrap();
        let report = vis::checkpoints::rewind_files(&mut recorder, &plan, false, 3, None).unwrap();
        assert_eq!(read(&ws.join("keep.txt")), "k0\n");
        assert!(
            !ws.join("made").exists(),
            "the rewind made the removed file's directories again: {report:?}"
        );
        assert!(!names(&ws).iter().any(|n| n.starts_with(".vis-rewind")));

        // The same in a fork's copy: the person removed made/ after the last block, so the
        // copy has no made/, and the file to take away from it is not there either.
        std::fs::create_dir_all(ws.join("made/deep")).unwrap();
        ok(&env.exec("r", "open('made/deep/new.txt', 'w').write('n2\\n')"));
        std::fs::remove_dir_all(ws.join("made")).unwrap();
        let dir = env.path().join("forked");
        ok(&env.vis(&[
            "sessions",
            "fork",
            "r",
            "--at",
            "t2",
            "--workspace",
            dir.to_str().unwrap(),
        ]));
        assert!(!dir.join("made").exists());
        assert_eq!(read(&dir.join("keep.txt")), "k0\n");
    }
);
