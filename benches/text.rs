//! Benchmarks of the text tools (medians; run with `cargo bench --bench text`).
//!
//! - cat of a 100,000-line file (read + address + render);
//! - patch of 1,000 edits on a 100,000-line file, with the cost of the atomic write (temp file,
//!   fsync, rename, directory fsync) measured separately;
//! - grep (addresses, output rendered) vs `rg -n` on a large real tree: the CPython standard
//!   library plus the local cargo registry sources, for a rare literal, a common literal and a
//!   regex. Set VIS_BENCH_TREES (colon-separated) to use other trees.

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vis::text::{
    cat, grep, patch, CatOptions, Document, Edit, GrepOptions, PatchOptions, Workspace,
};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn big_file(lines: usize) -> Vec<u8> {
    let mut out = String::with_capacity(lines * 48);
    for i in 0..lines {
        out.push_str(&format!(
            "    let value_{i} = compute({i}, \"some text here\");\n"
        ));
    }
    out.into_bytes()
}

fn bench_cat(ws: &Workspace, dir: &Path) {
    std::fs::write(dir.join("big.rs.txt"), big_file(100_000)).expect("write");
    let mut samples = Vec::new();
    for _ in 0..15 {
        let start = Instant::now();
        let out = cat(ws, Path::new("big.rs.txt"), &CatOptions::default()).expect("cat");
        let text = out.render();
        samples.push(start.elapsed());
        assert!(text.len() > 4_000_000);
    }
    println!(
        "| cat, 100,000 lines (read, address, render) | {:.1} ms | ≤ 20 ms |",
        ms(median(samples))
    );
}

fn bench_patch(ws: &Workspace, dir: &Path) {
    let original = big_file(100_000);
    let document = Document::parse(original.clone());
    // 1,000 edits spread over the file: replacements, deletions and inserts.
    let edits: Vec<Edit> = (0..1000)
        .map(|k| {
            let i = k * 100 + 7;
            let a = document.address(i).to_string();
            match k % 4 {
                0 => Edit::replace(a, format!("    let changed_{k} = 1;")),
                1 => Edit::delete(a.clone(), document.address(i + 1).to_string()),
                2 => Edit::insert_after(a, format!("    // note {k}\n    // more")),
                _ => Edit::insert_before(a, "    // before"),
            }
        })
        .collect();
    let path = dir.join("big.txt");
    let mut total = Vec::new();
    let mut write_only = Vec::new();
    for _ in 0..11 {
        std::fs::write(&path, &original).expect("reset");
        let start = Instant::now();
        let out = patch(ws, Path::new("big.txt"), &edits, &PatchOptions::default()).expect("patch");
        total.push(start.elapsed());
        assert_eq!(out.lines_before, 100_000);
        // The same-size atomic write alone: temp file, write, fsync, rename, dir fsync.
        let bytes = std::fs::read(&path).expect("read");
        let start = Instant::now();
        let mut temp = tempfile::NamedTempFile::new_in(dir).expect("temp");
        std::io::Write::write_all(&mut temp, &bytes).expect("write");
        temp.as_file().sync_all().expect("fsync");
        temp.persist(dir.join("copy.txt")).expect("rename");
        std::fs::File::open(dir)
            .expect("dir")
            .sync_all()
            .expect("dir fsync");
        write_only.push(start.elapsed());
    }
    let (t, w) = (ms(median(total)), ms(median(write_only)));
    println!("| patch, 1,000 edits on 100,000 lines (total) | {t:.1} ms | |");
    println!("| … of which the atomic write with fsyncs (measured alone) | {w:.1} ms | |");
    println!(
        "| … patch work excluding the write | {:.1} ms | ≤ 50 ms |",
        t - w
    );

    // The same batch on a Python file, where CPython compiles the result (the gate).
    let py = dir.join("big.py");
    let mut py_total = Vec::new();
    for _ in 0..5 {
        std::fs::write(&py, &original).expect("reset");
        let start = Instant::now();
        patch(ws, Path::new("big.py"), &edits, &PatchOptions::default()).expect("patch py");
        py_total.push(start.elapsed());
    }
    println!(
        "| patch, same batch on a .py file (incl. CPython compile gate) | {:.1} ms | |",
        ms(median(py_total))
    );
}

fn bench_grep() {
    let trees: Vec<PathBuf> = match std::env::var("VIS_BENCH_TREES") {
        Ok(v) => v.split(':').map(PathBuf::from).collect(),
        Err(_) => {
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
            let stdlib = Command::new("python3")
                .args([
                    "-c",
                    "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
                ])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            vec![
                PathBuf::from(stdlib),
                PathBuf::from(home).join(".cargo/registry/src"),
            ]
        }
    };
    let trees: Vec<PathBuf> = trees.into_iter().filter(|t| t.is_dir()).collect();
    if Command::new("rg").arg("--version").output().is_err() {
        println!("rg not installed; grep benchmark skipped (apt-get install -y ripgrep)");
        return;
    }
    let ws = Workspace::new(["/"]);
    println!(
        "\ntree: {}",
        trees
            .iter()
            .map(|t| t.display().to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    );
    println!(
        "\n| pattern | matches | rg -n | grep (all, rendered) | ratio | grep (limit=100) | ratio |"
    );
    println!("|---|---|---|---|---|---|---|");
    let cases: &[(&str, &str, bool)] = &[
        ("rare literal", "PyErr_SetInterrupt", true),
        ("common literal", "return", true),
        ("regex", r"fn \w+_mut\(|def \w+\(self, \w+\)", false),
    ];
    for (name, pattern, fixed) in cases {
        let rg = || {
            let mut cmd = Command::new("rg");
            cmd.arg("-n");
            if *fixed {
                cmd.arg("-F");
            }
            cmd.arg("-e")
                .arg(pattern)
                .args(&trees)
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let start = Instant::now();
            cmd.status().expect("rg");
            start.elapsed()
        };
        let ours = |limit: Option<usize>| {
            let options = GrepOptions {
                fixed: *fixed,
                limit,
                ..GrepOptions::default()
            };
            let start = Instant::now();
            let out = grep(&ws, pattern, &trees, &options).expect("grep");
            let text = out.render();
            let elapsed = start.elapsed();
            (elapsed, out.total_matches, text.len())
        };
        // Warm the page cache for both.
        rg();
        ours(None);
        let (mut r, mut g, mut l) = (Vec::new(), Vec::new(), Vec::new());
        let mut count = 0;
        for _ in 0..5 {
            r.push(rg());
            let (t, n, _) = ours(None);
            g.push(t);
            count = n;
            l.push(ours(Some(100)).0);
        }
        let (r, g, l) = (ms(median(r)), ms(median(g)), ms(median(l)));
        println!("| {name} `{pattern}` | {count} | {r:.0} ms | {g:.0} ms | {:.2}× | {l:.0} ms | {:.2}× |", g / r, l / r);
    }
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new([dir.path()]);
    println!("| benchmark | median | target |\n|---|---|---|");
    bench_cat(&ws, dir.path());
    bench_patch(&ws, dir.path());
    if std::env::args().any(|a| a == "--no-grep") {
        return;
    }
    bench_grep();
}
