//! grep: output shape, options, and equality with `rg -n` on a real tree.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use vis::text::{grep, GrepOptions, LineHash, Workspace};

use super::support::{stdlib, Ws};

fn run(w: &Ws, pattern: &str, options: GrepOptions) -> String {
    grep(&w.ws, pattern, &[], &options).expect("grep").render()
}

fn tree() -> Ws {
    let w = Ws::new();
    w.write("b.py", "import os\nx = 1\nimport sys\n");
    w.write("a/z.py", "def f():\n    import os\n    return os.sep\n");
    w.write("a/y.txt", "Import OS\n");
    w.write("notes.md", "nothing here\n");
    w
}

#[test]
fn grouped_sorted_addressed() {
    let w = tree();
    let out = run(&w, "import", GrepOptions::default());
    let h = |s: &str| LineHash::of(s.as_bytes());
    let expected = format!(
        "a/z.py\n2:{}|    import os\n\nb.py\n1:{}|import os\n3:{}|import sys",
        h("    import os"),
        h("import os"),
        h("import sys")
    );
    assert_eq!(out, expected);
}

#[test]
fn structured_matches() {
    let w = tree();
    let found = grep(&w.ws, "os", &[], &GrepOptions::default()).expect("grep");
    let rows: Vec<(String, usize)> = found
        .matches()
        .iter()
        .map(|m| (m.path.clone(), m.address.line))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("a/z.py".into(), 2),
            ("a/z.py".into(), 3),
            ("b.py".into(), 1)
        ]
    );
    assert_eq!(found.total_matches, 3);
}

#[test]
fn case_word_fixed_options() {
    let w = tree();
    let ci = GrepOptions {
        ignore_case: true,
        ..GrepOptions::default()
    };
    assert!(run(&w, "import os", ci).contains("a/y.txt"));
    let smart = GrepOptions {
        smart_case: true,
        ..GrepOptions::default()
    };
    assert!(run(&w, "import os", smart.clone()).contains("a/y.txt"));
    assert!(!run(&w, "Import os", smart).contains("b.py"));
    let word = GrepOptions {
        word: true,
        ..GrepOptions::default()
    };
    assert!(run(&w, "o", word).starts_with("no matches"));
    let fixed = GrepOptions {
        fixed: true,
        ..GrepOptions::default()
    };
    assert!(run(&w, "os.sep", fixed.clone()).contains("3:"));
    assert!(run(&w, "o(", fixed).starts_with("no matches"));
}

#[test]
fn globs_types_and_paths() {
    let w = tree();
    let glob = GrepOptions {
        globs: vec!["*.txt".into()],
        ignore_case: true,
        ..GrepOptions::default()
    };
    let out = run(&w, "import", glob);
    assert!(out.starts_with("a/y.txt") && !out.contains("b.py"), "{out}");
    let not = GrepOptions {
        globs: vec!["!a/**".into()],
        ..GrepOptions::default()
    };
    assert!(!run(&w, "import", not).contains("a/z.py"));
    let ty = GrepOptions {
        types: vec!["py".into()],
        ignore_case: true,
        ..GrepOptions::default()
    };
    assert!(!run(&w, "import", ty).contains("y.txt"));
    let found = grep(
        &w.ws,
        "import",
        &[PathBuf::from("a")],
        &GrepOptions::default(),
    )
    .expect("grep");
    assert_eq!(
        found
            .files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        vec!["a/z.py"]
    );
    let one = grep(
        &w.ws,
        "x",
        &[PathBuf::from("./b.py")],
        &GrepOptions::default(),
    )
    .expect("grep");
    assert!(one.render().starts_with("b.py\n2:"), "{one}");
}

#[test]
fn context_lines_are_addressed_with_breaks() {
    let w = Ws::new();
    let text: String = (1..=20)
        .map(|i| {
            if i == 5 || i == 15 {
                "hit\n".to_string()
            } else {
                format!("l{i}\n")
            }
        })
        .collect();
    w.write("c.txt", text);
    let options = GrepOptions {
        before: 1,
        after: 1,
        ..GrepOptions::default()
    };
    let out = run(&w, "hit", options);
    let h = |s: &str| LineHash::of(s.as_bytes());
    let expected = format!(
        "c.txt\n4:{}-l4\n5:{}|hit\n6:{}-l6\n--\n14:{}-l14\n15:{}|hit\n16:{}-l16",
        h("l4"),
        h("hit"),
        h("l6"),
        h("l14"),
        h("hit"),
        h("l16")
    );
    assert_eq!(out, expected);
}

#[test]
fn limit_and_max_count() {
    let w = Ws::new();
    for f in ["a.txt", "b.txt", "c.txt"] {
        w.write(f, "x\nx\nx\n");
    }
    let limited = GrepOptions {
        limit: Some(4),
        ..GrepOptions::default()
    };
    let out = run(&w, "x", limited);
    assert!(
        out.contains("a.txt") && out.contains("b.txt") && !out.contains("c.txt"),
        "{out}"
    );
    assert!(
        out.ends_with("[5 more matches in 2 files not shown; narrow the search or raise limit=]"),
        "{out}"
    );
    let max = GrepOptions {
        max_count: Some(1),
        ..GrepOptions::default()
    };
    let found = grep(&w.ws, "x", &[], &max).expect("grep");
    assert_eq!(found.total_matches, 3);
    assert_eq!(found.matches().len(), 3);
}

#[test]
fn limit_keeps_the_first_matches_in_path_order_over_many_files() {
    let w = Ws::new();
    for i in 0..300 {
        w.write(&format!("d/f{i:03}.txt"), "x\nx\n");
    }
    let options = GrepOptions {
        limit: Some(5),
        ..GrepOptions::default()
    };
    let found = grep(&w.ws, "x", &[], &options).expect("grep");
    let paths: Vec<String> = found
        .matches()
        .iter()
        .map(|m| format!("{}:{}", m.path, m.address.line))
        .collect();
    assert_eq!(
        paths,
        vec![
            "d/f000.txt:1",
            "d/f000.txt:2",
            "d/f001.txt:1",
            "d/f001.txt:2",
            "d/f002.txt:1"
        ]
    );
    assert_eq!(found.total_matches, 600);
    assert_eq!(found.omitted(), (595, 298));
}

#[test]
fn hidden_ignored_and_binary_files() {
    let w = Ws::new();
    std::fs::create_dir(w.path(".git")).expect("mkdir .git");
    w.write(".gitignore", "ignored.txt\n");
    w.write("ignored.txt", "needle\n");
    w.write(".hidden.txt", "needle\n");
    w.write("bin.dat", b"needle\x00\n");
    w.write("plain.txt", "needle\n");
    let files = |options: GrepOptions| -> Vec<String> {
        grep(&w.ws, "needle", &[], &options)
            .expect("grep")
            .files
            .iter()
            .map(|f| f.path.clone())
            .collect()
    };
    assert_eq!(files(GrepOptions::default()), vec!["plain.txt"]);
    assert_eq!(
        files(GrepOptions {
            hidden: true,
            ..Default::default()
        }),
        vec![".hidden.txt", "plain.txt"]
    );
    assert_eq!(
        files(GrepOptions {
            no_ignore: true,
            ..Default::default()
        }),
        vec!["ignored.txt", "plain.txt"]
    );
}

#[test]
fn crlf_lines_match_end_anchor() {
    let w = Ws::new();
    w.write("w.txt", "alpha\r\nbeta\r\n");
    let found = grep(&w.ws, "alpha$", &[], &GrepOptions::default()).expect("grep");
    assert_eq!(found.total_matches, 1);
    assert!(!found.render().contains('\r'));
}

/// `rg -n` over a few real stdlib packages must find exactly the lines grep finds.
#[test]
fn same_matches_as_ripgrep() {
    let Ok(version) = Command::new("rg").arg("--version").output() else {
        panic!("ripgrep (rg) is not installed: apt-get install -y ripgrep");
    };
    assert!(version.status.success());
    let root = stdlib();
    let dirs = [
        "asyncio",
        "email",
        "json",
        "unittest",
        "xml",
        "logging",
        "importlib",
        "http",
    ];
    let ws = Workspace::new([root.clone()]);
    let cases: &[(&str, bool)] = &[
        ("import os", true),
        ("self.assert", true),
        ("TODO", true),
        (r"def \w+\(self\):$", false),
        (r"^class \w+\(", false),
        (r"[0-9]{4,}", false),
        (r"(?i)utf-?8", false),
    ];
    for (pattern, fixed) in cases {
        let mut rg = Command::new("rg");
        rg.current_dir(&root)
            .args(["-n", "--no-heading", "--with-filename", "--color", "never"]);
        if *fixed {
            rg.arg("-F");
        }
        rg.arg("-e").arg(pattern).args(dirs);
        let output = rg.output().expect("run rg");
        let expected: BTreeSet<(String, usize)> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| {
                let mut parts = l.splitn(3, ':');
                let path = parts.next()?.to_string();
                let line = parts.next()?.parse().ok()?;
                Some((path, line))
            })
            .collect();
        let options = GrepOptions {
            fixed: *fixed,
            limit: None,
            ..GrepOptions::default()
        };
        let paths: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
        let found = grep(&ws, pattern, &paths, &options).expect("grep");
        let actual: BTreeSet<(String, usize)> = found
            .matches()
            .into_iter()
            .map(|m| (m.path, m.address.line))
            .collect();
        assert!(!expected.is_empty(), "{pattern}: rg found nothing");
        assert_eq!(actual.len(), expected.len(), "{pattern}: count differs");
        assert!(actual == expected, "{pattern}: different matches");
    }
}
