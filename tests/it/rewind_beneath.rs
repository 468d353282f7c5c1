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
