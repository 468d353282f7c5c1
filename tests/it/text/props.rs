//! Property tests: random files × random valid edit batches against a reference model;
//! cat→patch round trips; stale lines always rejected.

use std::path::Path;

use proptest::prelude::*;
use vis::text::{cat, patch, CatOptions, Edit, LineHash, PatchOptions};

use super::support::Ws;

/// A file as the reference model sees it.
#[derive(Clone, Debug)]
struct Model {
    lines: Vec<String>,
    crlf: Vec<bool>,
    bom: bool,
    final_newline: bool,
}

impl Model {
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.bom {
            out.extend_from_slice("\u{feff}".as_bytes());
        }
        for (i, line) in self.lines.iter().enumerate() {
            out.extend_from_slice(line.as_bytes());
            if i + 1 < self.lines.len() || self.final_newline {
                out.extend_from_slice(if self.crlf[i] { b"\r\n" } else { b"\n" });
            }
        }
        out
    }

    fn dominant_crlf(&self) -> bool {
        let n = self.lines.len();
        let with_ending = if self.final_newline {
            n
        } else {
            n.saturating_sub(1)
        };
        let crlf = self.crlf[..with_ending].iter().filter(|c| **c).count();
        crlf > with_ending - crlf
    }
}

fn line_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z ]{1,12}",
        "    [a-z_]{1,8} = [0-9]{1,3}",
        "[a-zé字😀\t ]{1,10}",
        Just("  trailing  ".to_string()),
    ]
}

fn model_strategy() -> impl Strategy<Value = Model> {
    (
        prop::collection::vec((line_strategy(), any::<bool>()), 0..14),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(rows, bom, final_newline)| {
            let (mut lines, crlf): (Vec<String>, Vec<bool>) = rows.into_iter().unzip();
            // A last line that is empty and unterminated is no line at all.
            if !final_newline {
                if let Some(last) = lines.last_mut().filter(|l| l.is_empty()) {
                    *last = "end".into();
                }
            }
            Model {
                lines,
                crlf,
                bom,
                final_newline,
            }
        })
}

/// A plan of edits decoded from random codes, plus the expected result.
fn plan(model: &Model, codes: &[(u8, u8, String)]) -> (Vec<Edit>, Model) {
    let n = model.lines.len();
    let addr = |i: usize| format!("{}:{}", i + 1, LineHash::of(model.lines[i].as_bytes()));
    let code = |k: usize| codes[k % codes.len()].clone();
    let dominant = model.dominant_crlf();
    let mut edits = Vec::new();
    // Expected rows: (content, crlf, is_original_last_without_ending)
    let mut rows: Vec<(String, bool)> = Vec::new();
    let split = |text: &str| -> Vec<String> {
        if text.is_empty() {
            return vec![];
        }
        text.strip_suffix('\n')
            .unwrap_or(text)
            .split('\n')
            .map(str::to_string)
            .collect()
    };
    let insert_at_gap =
        |g: usize, edits: &mut Vec<Edit>, rows: &mut Vec<(String, bool)>, k: usize| {
            let (c, _, text) = code(k);
            if c % 3 != 0 {
                return;
            }
            let text = format!("{text}{}", if c % 2 == 0 { "\n" } else { "" });
            let edit = if g == 0 && (n == 0 || c % 5 < 2) {
                Edit::insert_at_start(text.clone())
            } else if g == n && c % 7 < 3 {
                Edit::insert_at_end(text.clone())
            } else if g > 0 && c % 5 < 2 {
                Edit::insert_after(addr(g - 1), text.clone())
            } else if g < n {
                Edit::insert_before(addr(g), text.clone())
            } else {
                Edit::insert_after(addr(g - 1), text.clone())
            };
            edits.push(edit);
            rows.extend(split(&text).into_iter().map(|l| (l, dominant)));
        };
    let mut i = 0;
    let mut k = 0;
    insert_at_gap(0, &mut edits, &mut rows, k);
    while i < n {
        k += 1;
        let (c, len, text) = code(k);
        if c % 4 == 1 {
            let last = (i + (len as usize % 3)).min(n - 1);
            let text = if c % 8 == 1 { String::new() } else { text };
            edits.push(Edit::replace_range(addr(i), addr(last), text.clone()));
            rows.extend(split(&text).into_iter().map(|l| (l, dominant)));
            i = last + 1;
        } else {
            let ending = if i == n - 1 && !model.final_newline {
                dominant
            } else {
                model.crlf[i]
            };
            rows.push((model.lines[i].clone(), ending));
            i += 1;
        }
        k += 1;
        insert_at_gap(i, &mut edits, &mut rows, k);
    }
    let (lines, crlf) = rows.into_iter().unzip();
    let expected = Model {
        lines,
        crlf,
        bom: model.bom,
        final_newline: model.final_newline || n == 0,
    };
    (edits, expected)
}

fn codes_strategy() -> impl Strategy<Value = Vec<(u8, u8, String)>> {
    prop::collection::vec(
        (any::<u8>(), any::<u8>(), "[a-z]{0,5}(\n[a-z ]{0,4}){0,2}"),
        1..20,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn random_batches_match_the_reference_model(
        model in model_strategy(),
        codes in codes_strategy(),
        seed in any::<u64>(),
    ) {
        let (mut edits, expected) = plan(&model, &codes);
        prop_assume!(!edits.is_empty());
        // Order within a batch must not matter.
        let len = edits.len();
        edits.rotate_left((seed as usize) % len);
        if seed % 2 == 0 { edits.reverse(); }
        let w = Ws::new();
        w.write("f.txt", model.bytes());
        let result = patch(&w.ws, Path::new("f.txt"), &edits, &PatchOptions::default());
        prop_assert!(result.is_ok(), "{:?}", result.err().map(|e| e.to_string()));
        prop_assert_eq!(
            String::from_utf8_lossy(&w.read("f.txt")).into_owned(),
            String::from_utf8_lossy(&expected.bytes()).into_owned()
        );
    }

    #[test]
    fn cat_then_patch_with_the_same_text_round_trips(
        mut model in model_strategy(),
        crlf in any::<bool>(),
        pick in prop::collection::vec(any::<bool>(), 14),
    ) {
        // Uniform endings: replacing a line gives it the file's ending, which is its own.
        // The text gets a trailing "\n" because an empty text deletes; "\n" is one empty line.
        for c in model.crlf.iter_mut() { *c = crlf; }
        let w = Ws::new();
        w.write("f.txt", model.bytes());
        let shown = cat(&w.ws, Path::new("f.txt"), &CatOptions::default()).expect("cat").lines();
        let edits: Vec<Edit> = shown
            .iter()
            .zip(pick.iter().cycle())
            .filter(|(_, p)| **p)
            .map(|(l, _)| Edit::replace(l.address.to_string(), format!("{}\n", l.text)))
            .collect();
        prop_assume!(!edits.is_empty());
        patch(&w.ws, Path::new("f.txt"), &edits, &PatchOptions::default()).expect("patch");
        prop_assert_eq!(w.read("f.txt"), model.bytes());
    }

    #[test]
    fn a_stale_line_is_always_rejected(
        model in model_strategy(),
        index in any::<prop::sample::Index>(),
        replacement in line_strategy(),
    ) {
        prop_assume!(!model.lines.is_empty());
        let i = index.index(model.lines.len());
        let old = &model.lines[i];
        // A changed line passes only if the hashes collide (1/9025); that rate is measured in
        // `collision_rate_of_changed_lines`.
        prop_assume!(LineHash::of(old.trim_end().as_bytes()) != LineHash::of(replacement.trim_end().as_bytes()));
        let stale = format!("{}:{}", i + 1, LineHash::of(old.as_bytes()));
        let mut changed = model.clone();
        changed.lines[i] = replacement;
        let w = Ws::new();
        w.write("f.txt", changed.bytes());
        let err = patch(&w.ws, Path::new("f.txt"), &[Edit::replace(&stale, "x")], &PatchOptions::default());
        prop_assert!(err.is_err());
        prop_assert_eq!(w.read("f.txt"), changed.bytes());
    }
}

#[test]
fn collision_rate_of_changed_lines() {
    // One-character mutations of real-looking lines: the worst case for a weak hash.
    let mut same = 0u64;
    let mut total = 0u64;
    for i in 0..300_000u64 {
        let base = format!("    value_{} = compute({}, {})", i % 977, i, i * 7);
        let mut changed = base.clone().into_bytes();
        let pos = (i as usize * 31) % changed.len();
        changed[pos] = if changed[pos] == b'x' { b'y' } else { b'x' };
        total += 1;
        same += u64::from(LineHash::of(base.as_bytes()) == LineHash::of(&changed));
    }
    let rate = same as f64 / total as f64;
    assert!(
        rate <= 1.0 / 4096.0,
        "collision rate {rate} ({same}/{total})"
    );
}
