//! The o200k token cost of an address, per alphabet and length: why addresses use the CVCV
//! hash. `cargo bench --bench address_cost`; figures are in docs/text.md.

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::PathBuf;
use std::process::Command;

use vis::text::LineHash;
use xxhash_rust::xxh3::xxh3_64;

/// The CPython standard library (`VIS_TEST_STDLIB` overrides), a large corpus of real code.
fn stdlib() -> PathBuf {
    if let Ok(path) = std::env::var("VIS_TEST_STDLIB") {
        return PathBuf::from(path);
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .expect("python3");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn encode(mut h: u64, alphabet: &[u8], len: usize) -> String {
    let mut s = String::new();
    for _ in 0..len {
        s.push(alphabet[(h % alphabet.len() as u64) as usize] as char);
        h /= alphabet.len() as u64;
    }
    s
}

fn main() {
    let bpe = tiktoken_rs::o200k_base().expect("o200k");
    let mut files: Vec<_> = std::fs::read_dir(stdlib())
        .expect("stdlib")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    files.truncate(60);
    type Scheme = (&'static str, f64, Box<dyn Fn(&str) -> String>);
    let hashed = |alphabet: &'static [u8], len: usize| -> Box<dyn Fn(&str) -> String> {
        Box::new(move |l: &str| encode(xxh3_64(l.trim_end().as_bytes()), alphabet, len))
    };
    let schemes: Vec<Scheme> = vec![
        ("no hash (LINE:|)", 0.0, Box::new(|_| String::new())),
        ("hex x3", 12.0, hashed(b"0123456789abcdef", 3)),
        ("hex x4", 16.0, hashed(b"0123456789abcdef", 4)),
        (
            "base32 x3",
            15.0,
            hashed(b"abcdefghijklmnopqrstuvwxyz234567", 3),
        ),
        ("a-z x3", 14.1, hashed(b"abcdefghijklmnopqrstuvwxyz", 3)),
        (
            "base64url x3",
            18.0,
            hashed(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
                3,
            ),
        ),
        (
            "CVCV (chosen)",
            13.1,
            Box::new(|l: &str| LineHash::of(l.as_bytes()).to_string()),
        ),
    ];
    let mut plain = 0usize;
    let mut lines = 0usize;
    let mut costs = vec![0usize; schemes.len()];
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        plain += bpe.encode_ordinary(&text).len();
        let rows: Vec<&str> = text.lines().collect();
        lines += rows.len();
        for (i, (_, _, hash)) in schemes.iter().enumerate() {
            let rendered: String = rows
                .iter()
                .enumerate()
                .map(|(n, l)| format!("{}:{}|{l}\n", n + 1, hash(l)))
                .collect();
            costs[i] += bpe.encode_ordinary(&rendered).len();
        }
    }
    let base = (costs[0] - plain) as f64 / lines as f64;
    println!("{lines} lines from {} files", files.len());
    for (i, (name, bits, _)) in schemes.iter().enumerate() {
        let per_line = (costs[i] - plain) as f64 / lines as f64;
        println!(
            "{name:18} {bits:5.1} bits  {per_line:.2} tokens/line  hash alone {:.2}",
            per_line - base
        );
    }
}
