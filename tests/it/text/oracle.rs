//! Oracle corpus: real files from the CPython standard library, modified with known edits;
//! the line diff between original and modified (computed with `similar`) is turned into
//! address edits, applied with patch, and the result byte-compared with the modified file.

use std::path::{Path, PathBuf};

use similar::{capture_diff_slices, Algorithm, DiffOp};
use vis::text::{patch, Document, Edit, PatchOptions};

use super::support::{stdlib, Ws};

/// Deterministic pseudo-random numbers (xorshift), so the corpus is the same every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Modify `lines`: rewrite some, delete runs, insert new ones.
fn modify(lines: &[String], rng: &mut Rng) -> Vec<String> {
    let mut out = Vec::with_capacity(lines.len() + 16);
    let mut i = 0;
    while i < lines.len() {
        match rng.below(40) {
            0 => {
                out.push(format!("{} # edited", lines[i]));
                i += 1;
            }
            1 => i += 1 + rng.below(3), // delete a run
            2 => {
                out.push(format!("    inserted_{} = {}", i, rng.below(1000)));
                out.push(lines[i].clone());
                i += 1;
            }
            3 => {
                out.push(lines[i].to_uppercase());
                out.push(String::new());
                i += 1;
            }
            _ => {
                out.push(lines[i].clone());
                i += 1;
            }
        }
    }
    if rng.below(3) == 0 {
        out.push("# appended at the end".into());
    }
    out
}

fn join(lines: &[String], ending: &str, final_newline: bool) -> Vec<u8> {
    let mut text = lines.join(ending);
    if final_newline && !lines.is_empty() {
        text.push_str(ending);
    }
    text.into_bytes()
}

/// Turn a line diff into address edits against `old`.
fn edits_from_diff(old: &Document, old_lines: &[String], new_lines: &[String]) -> Vec<Edit> {
    let addr = |i: usize| old.address(i).to_string();
    let text = |from: usize, to: usize| new_lines[from..to].join("\n");
    let mut edits = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, old_lines, new_lines) {
        match op {
            DiffOp::Equal { .. } => {}
            DiffOp::Delete {
                old_index, old_len, ..
            } => {
                edits.push(Edit::delete(addr(old_index), addr(old_index + old_len - 1)));
            }
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => {
                let lines = text(new_index, new_index + new_len) + "\n";
                edits.push(if old_index < old_lines.len() {
                    Edit::insert_before(addr(old_index), lines)
                } else {
                    Edit::insert_at_end(lines)
                });
            }
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                edits.push(Edit::replace_range(
                    addr(old_index),
                    addr(old_index + old_len - 1),
                    text(new_index, new_index + new_len) + "\n",
                ));
            }
        }
    }
    edits
}

fn corpus() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(stdlib())
        .expect("stdlib dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    files.into_iter().step_by(4).take(60).collect()
}

#[test]
fn stdlib_files_patched_from_diffs_byte_match() {
    let files = corpus();
    assert!(
        files.len() >= 30,
        "expected a real corpus, found {} files",
        files.len()
    );
    let w = Ws::new();
    let mut rng = Rng(0x5eed_cafe_f00d);
    let mut checked = 0;
    for (n, file) in files.iter().enumerate() {
        let Ok(source) = std::fs::read_to_string(file) else {
            continue;
        };
        let lines: Vec<String> = source.lines().map(str::to_string).collect();
        // Vary the line ending and final-newline state across the corpus.
        let ending = if n % 3 == 0 { "\r\n" } else { "\n" };
        let final_newline = n % 5 != 0;
        let original = join(&lines, ending, final_newline);
        let modified_lines = modify(&lines, &mut rng);
        let expected = join(&modified_lines, ending, final_newline);
        // Unchecked extension: the corpus edits are not meant to keep Python valid.
        let name = format!("{}.txt", file.file_name().expect("name").to_string_lossy());
        w.write(&name, &original);
        let document = Document::parse(original.clone());
        let edits = edits_from_diff(&document, &lines, &modified_lines);
        if edits.is_empty() {
            continue;
        }
        patch(&w.ws, Path::new(&name), &edits, &PatchOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            w.read(&name) == expected,
            "{name}: patched bytes differ from the expected file"
        );
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} files checked");
}

#[test]
fn python_files_pass_the_gate_when_edits_keep_them_valid() {
    // Comment-only edits keep any Python file valid; the gate (CPython's compiler) must agree.
    let w = Ws::new();
    for file in corpus().iter().take(15) {
        let Ok(source) = std::fs::read(file) else {
            continue;
        };
        let name = file
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        w.write(&name, &source);
        let document = Document::parse(source.clone());
        let edits = vec![
            Edit::insert_at_start("# vis: edited\n"),
            Edit::insert_at_end("# end\n"),
        ];
        let out = patch(&w.ws, Path::new(&name), &edits, &PatchOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            out.render().contains("python syntax ok"),
            "{}",
            out.render()
        );
        let mut expected = b"# vis: edited\n".to_vec();
        expected.extend_from_slice(document.bytes());
        if !document.final_newline() {
            // insert_at_end keeps "no final newline": the old last line gets one, the new doesn't.
            expected.extend_from_slice(b"\n# end");
        } else {
            expected.extend_from_slice(b"# end\n");
        }
        assert!(w.read(&name) == expected, "{name}");
    }
}
