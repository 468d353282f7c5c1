//! The catalog in the prompt: a deterministic, token-budgeted rendering of a manifest into a
//! [`Snapshot`] (the snapshot type, its content address and its diffs are in `snapshot.rs`).
//!
//! # Modes
//!
//! - [`RenderMode::Full`] when every function line (and every page/skill line) plus the header
//!   fits within the budget (o200k tokens, `≤ budget`): header, then all functions sorted by
//!   name, then all pages and skills sorted by name.
//! - [`RenderMode::Summary`] otherwise: a header with totals; one line per namespace that
//!   directly holds functions (the top level first as `(top level)`, then sorted by name) with
//!   its function count, marked `complete` (all its functions are listed under it) or
//!   `partial: N shown`; under each, the functions shown. Shown are: pinned functions, all
//!   functions of a pinned namespace, and whole namespaces that still fit in the budget left
//!   after that (tried smallest first by bytes, ties by name, stopping at the first that does
//!   not fit). Then pinned pages and skills, and a line counting the others. When even one
//!   line per namespace does not fit, summary mode becomes an index: the pinned functions
//!   (always shown) under their namespace lines, then the other namespaces as `name (count)`,
//!   as many as the budget allows, and a line counting the rest. Only pinned entries can push
//!   it past the budget.
//! - [`RenderMode::Empty`] when no function is visible: the body is empty and the gateway omits
//!   the catalog and its instructions.
//!
//! # Determinism
//!
//! The rendering depends only on the set of visible entries: everything is sorted by name (byte
//! order), never by load or manifest order, and no line is blank or starts with whitespace. The
//! same set loaded in any order gives the same bytes and so the same blake3 hash.
//!
//! # Cost
//!
//! Token counting is line-additive (see [`super::tokens`]), so the full-mode check stops as soon
//! as the running sum passes the budget: for 5,000 entries and the default budget only the first
//! ~2,000 tokens of lines are ever encoded.

use std::collections::BTreeMap;

use super::error::Result;
use super::manifest::{with_summary, EntryKind, Manifest, ManifestEntry};
use super::names;
use super::snapshot::{RenderMode, Snapshot, SnapshotItem};
use super::tokens;

/// Default catalog budget in o200k tokens.
pub const DEFAULT_BUDGET_TOKENS: usize = 2_000;

const FULL_HEADER: &str = "Functions available in python_execution (call them directly; doc(name) shows full documentation, apropos(pattern) searches names):\n";

/// Renders `vis catalog` output for `manifest` under `budget_tokens`.
pub fn render_catalog_text(manifest: &Manifest, budget_tokens: usize) -> Result<String> {
    Ok(render_catalog(manifest, budget_tokens)?.text())
}

/// Renders the catalog of `manifest` under `budget_tokens` (see the module docs).
pub fn render_catalog(manifest: &Manifest, budget_tokens: usize) -> Result<Snapshot> {
    let functions: Vec<&ManifestEntry> = manifest
        .canonical()
        .filter(|e| e.kind == EntryKind::Function)
        .collect();
    if functions.is_empty() {
        return Ok(Snapshot::empty());
    }
    let docs: Vec<&ManifestEntry> = manifest
        .canonical()
        .filter(|e| matches!(e.kind, EntryKind::Page | EntryKind::Skill))
        .collect();

    let bpe = tokens::encoder()?;
    let mut used = bpe.encode_ordinary(FULL_HEADER).len();
    let mut lines: Vec<String> = Vec::with_capacity(functions.len() + docs.len());
    let mut fits = used <= budget_tokens;
    if fits {
        for e in functions.iter().chain(docs.iter()) {
            let mut line = e.line();
            line.push('\n');
            used += bpe.encode_ordinary(&line).len();
            lines.push(line);
            if used > budget_tokens {
                fits = false;
                break;
            }
        }
    }
    if !fits {
        return render_summary(manifest, &functions, &docs, budget_tokens);
    }
    let mut body =
        String::with_capacity(FULL_HEADER.len() + lines.iter().map(String::len).sum::<usize>());
    body.push_str(FULL_HEADER);
    let mut items = Vec::with_capacity(lines.len());
    for (e, line) in functions.iter().chain(docs.iter()).zip(lines.iter()) {
        body.push_str(line);
        items.push(SnapshotItem {
            name: e.name.clone(),
            kind: e.kind,
            line: line.trim_end_matches('\n').to_string(),
        });
    }
    Ok(Snapshot::with_tokens(RenderMode::Full, body, items, used))
}

struct Group<'a> {
    name: &'a str,
    summary: &'a str,
    funcs: Vec<&'a ManifestEntry>,
    shown: Vec<bool>,
    complete: bool,
}

impl Group<'_> {
    fn line(&self) -> String {
        self.line_as(self.complete)
    }

    fn line_as(&self, complete: bool) -> String {
        let n = self.funcs.len();
        let plural = if n == 1 { "" } else { "s" };
        let state = if complete {
            "complete".to_string()
        } else {
            format!(
                "partial: {} shown",
                self.shown.iter().filter(|s| **s).count()
            )
        };
        let head = if self.name.is_empty() {
            format!("(top level)  [{n} function{plural}, {state}]")
        } else {
            format!("{}  [namespace, {n} function{plural}, {state}]", self.name)
        };
        with_summary(head, self.summary)
    }

    fn hidden_bytes(&self) -> usize {
        self.funcs
            .iter()
            .zip(&self.shown)
            .filter(|(_, s)| !**s)
            .map(|(e, _)| e.name.len() + e.signature.len() + e.summary.len() + 6)
            .sum()
    }
}

fn count(line: &str) -> Result<usize> {
    Ok(tokens::encoder()?.encode_ordinary(line).len())
}

fn nl(mut s: String) -> String {
    s.push('\n');
    s
}

fn render_summary(
    manifest: &Manifest,
    functions: &[&ManifestEntry],
    docs: &[&ManifestEntry],
    budget: usize,
) -> Result<Snapshot> {
    // Group functions by their direct namespace; "" (top level) sorts first.
    let mut by_ns: BTreeMap<&str, Vec<&ManifestEntry>> = BTreeMap::new();
    for e in functions {
        by_ns.entry(names::parent(&e.name)).or_default().push(e);
    }
    let mut groups: Vec<Group<'_>> = by_ns
        .into_iter()
        .map(|(name, funcs)| {
            let info = manifest.namespace(name);
            let ns_pinned = info.is_some_and(|i| i.pinned);
            let shown: Vec<bool> = funcs.iter().map(|e| ns_pinned || e.pinned).collect();
            let complete = shown.iter().all(|s| *s);
            Group {
                name,
                summary: info.map_or("", |i| i.summary.as_str()),
                funcs,
                shown,
                complete,
            }
        })
        .collect();

    let namespaced = groups.iter().filter(|g| !g.name.is_empty()).count();
    let top = if groups.first().is_some_and(|g| g.name.is_empty()) {
        " plus the top level"
    } else {
        ""
    };
    let header = nl(format!(
        "Function catalog summary: {} functions in {namespaced} namespace{}{top}, too many to list within the token budget. Each namespace line gives its function count and whether all of them are shown below it (complete) or only some (partial). apropos(pattern, namespace=None) finds the others; doc(name) documents any name.",
        functions.len(),
        if namespaced == 1 { "" } else { "s" },
    ));
    let pinned_docs: Vec<&&ManifestEntry> = docs.iter().filter(|e| e.pinned).collect();
    let hidden_docs = docs.len() - pinned_docs.len();
    let docs_line = (hidden_docs > 0).then(|| {
        nl(format!(
            "Pages and skills not shown: {hidden_docs}; apropos(pattern) lists them and doc(name) reads them."
        ))
    });

    // Base cost: everything except the greedy fill.
    let mut used = count(&header)?;
    for g in &groups {
        used += count(&nl(g.line()))?;
        for (e, s) in g.funcs.iter().zip(&g.shown) {
            if *s {
                used += count(&nl(e.line()))?;
            }
        }
    }
    for e in &pinned_docs {
        used += count(&nl(e.line()))?;
    }
    if let Some(l) = &docs_line {
        used += count(l)?;
    }
    if used > budget {
        return render_index(functions.len(), &groups, &pinned_docs, docs_line, budget);
    }

    // Greedy fill: whole namespaces, smallest first, while they fit.
    let mut order: Vec<usize> = (0..groups.len()).filter(|&i| !groups[i].complete).collect();
    order.sort_by_cached_key(|&i| (groups[i].hidden_bytes(), groups[i].name));
    for i in order {
        let g = &groups[i];
        let old_line = count(&nl(g.line()))?;
        let new_line = count(&nl(g.line_as(true)))?;
        // Tokens left for the hidden lines once the namespace line reads `complete`.
        let Some(limit) = budget.saturating_add(old_line).checked_sub(used + new_line) else {
            break;
        };
        let hidden: Vec<String> = g
            .funcs
            .iter()
            .zip(&g.shown)
            .filter(|(_, s)| !**s)
            .map(|(e, _)| nl(e.line()))
            .collect();
        let (cost, exceeded) = tokens::count_lines_until(hidden.iter().map(String::as_str), limit)?;
        if exceeded {
            break;
        }
        used = used - old_line + new_line + cost;
        let g = &mut groups[i];
        g.shown.iter_mut().for_each(|s| *s = true);
        g.complete = true;
    }

    let mut body = header;
    let mut items = Vec::new();
    push_shown(&mut body, &mut items, &groups, &pinned_docs);
    if let Some(l) = &docs_line {
        body.push_str(l);
    }
    Ok(Snapshot::with_tokens(
        RenderMode::Summary,
        body,
        items,
        used,
    ))
}

/// Appends each group's line with the lines of its shown functions under it, then the pinned
/// pages and skills.
fn push_shown<'g, 'a: 'g>(
    body: &mut String,
    items: &mut Vec<SnapshotItem>,
    groups: impl IntoIterator<Item = &'g Group<'a>>,
    pinned_docs: &[&&ManifestEntry],
) {
    for g in groups {
        push_line(body, items, g.name, EntryKind::Namespace, g.line());
        for (e, _) in g.funcs.iter().zip(&g.shown).filter(|(_, s)| **s) {
            push_line(body, items, &e.name, e.kind, e.line());
        }
    }
    for e in pinned_docs {
        push_line(body, items, &e.name, e.kind, e.line());
    }
}

/// Appends one rendered line to the body and records it as a snapshot item.
fn push_line(
    body: &mut String,
    items: &mut Vec<SnapshotItem>,
    name: &str,
    kind: EntryKind,
    line: String,
) {
    body.push_str(&line);
    body.push('\n');
    items.push(SnapshotItem {
        name: name.to_string(),
        kind,
        line,
    });
}

/// The most compact summary, used when even one line per namespace does not fit: the pinned
/// functions (always shown) under their namespace lines, then the other namespaces as
/// `name (count)` on index lines, as many as the budget allows, and a count of the rest.
fn render_index(
    total_functions: usize,
    groups: &[Group<'_>],
    pinned_docs: &[&&ManifestEntry],
    docs_line: Option<String>,
    budget: usize,
) -> Result<Snapshot> {
    let mut body = format!(
        "Function catalog index: {total_functions} functions in {} namespaces, too many to describe within the token budget, so namespaces are listed by name with their function counts. apropos(pattern, namespace=NAME) lists a namespace's functions; doc(name) documents any name.\n",
        groups.len()
    );
    let mut items = Vec::new();
    let (with_pinned, others): (Vec<&Group<'_>>, Vec<&Group<'_>>) =
        groups.iter().partition(|g| g.shown.iter().any(|s| *s));
    push_shown(&mut body, &mut items, with_pinned, pinned_docs);
    let tail = docs_line.unwrap_or_default();
    let mut used = count(&body)? + count(&tail)?;
    // Room for the closing "… N more" line, whose digits are bounded by the group count.
    let more_reserve = count(&format!(
        "Not listed: {} more namespaces; apropos('.') lists every name.\n",
        others.len()
    ))?;
    let mut listed = 0;
    let mut line = String::new();
    for g in &others {
        let label = if g.name.is_empty() {
            "(top level)"
        } else {
            g.name
        };
        let entry = format!("{label} ({})", g.funcs.len());
        let piece = if line.is_empty() {
            entry.clone()
        } else {
            format!(", {entry}")
        };
        let cost = count(&piece)?;
        let last = listed + 1 == others.len();
        if used + cost + usize::from(!last) * more_reserve + 1 > budget {
            break;
        }
        used += cost;
        line.push_str(&piece);
        items.push(SnapshotItem {
            name: g.name.to_string(),
            kind: EntryKind::Namespace,
            line: entry,
        });
        listed += 1;
        // Index lines of about a hundred entries keep each line's tokens independent.
        if line.len() > 600 {
            body.push_str(&line);
            body.push('\n');
            used += 1;
            line.clear();
        }
    }
    if !line.is_empty() {
        body.push_str(&line);
        body.push('\n');
    }
    let hidden = others.len() - listed;
    if hidden > 0 {
        let more = format!("Not listed: {hidden} more namespaces; apropos('.') lists every name.");
        push_line(
            &mut body,
            &mut items,
            "(not listed)",
            EntryKind::Namespace,
            more,
        );
    }
    body.push_str(&tail);
    let tokens = count(&body)?;
    Ok(Snapshot::with_tokens(
        RenderMode::Summary,
        body,
        items,
        tokens,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::manifest::Origin;
    use crate::catalog::tokens::count_tokens;

    fn function(name: &str) -> ManifestEntry {
        ManifestEntry::function(name, "(x=None)", format!("Run {name}."), Origin::Core)
    }

    /// `namespaces` namespaces `ns00`… of `per_ns` functions each, plus one top-level function.
    fn entries(namespaces: usize, per_ns: usize) -> Vec<ManifestEntry> {
        let mut out = vec![function("top")];
        for n in 0..namespaces {
            for f in 0..per_ns {
                out.push(function(&format!("ns{n:02}.f{f:02}")));
            }
        }
        out
    }

    fn render(entries: Vec<ManifestEntry>, budget: usize) -> Snapshot {
        let manifest = Manifest::new(entries).expect("valid manifest");
        render_catalog(&manifest, budget).expect("render")
    }

    fn line_of<'a>(snapshot: &'a Snapshot, name: &str) -> Option<&'a str> {
        snapshot
            .items
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.line.as_str())
    }

    #[test]
    fn no_visible_function_is_the_empty_catalog() {
        let only_a_page = vec![ManifestEntry::page("vis.guide", "# Guide", Origin::Core)];
        let s = render(only_a_page, DEFAULT_BUDGET_TOKENS);
        assert!(s.is_empty());
        assert_eq!(s, Snapshot::empty());
    }

    #[test]
    fn full_mode_lists_functions_then_pages_by_name() {
        let mut e = vec![
            ManifestEntry::skill("release", "How to release", "", Origin::Core),
            function("zeta"),
            ManifestEntry::page("vis.guide", "# Guide", Origin::Core),
            function("alpha"),
        ];
        e.push(function("git.diff"));
        let s = render(e, DEFAULT_BUDGET_TOKENS);
        assert_eq!(s.mode, RenderMode::Full);
        assert_eq!(
            s.body,
            format!(
                "{FULL_HEADER}alpha(x=None)  — Run alpha.\ngit.diff(x=None)  — Run git.diff.\n\
                 zeta(x=None)  — Run zeta.\nrelease  [skill]  — How to release\n\
                 vis.guide  [page]  — Guide\n"
            )
        );
        assert_eq!(s.items.len(), 5);
        assert_eq!(
            s.tokens().expect("known"),
            count_tokens(&s.body).expect("count")
        );
    }

    #[test]
    fn one_token_short_of_full_is_a_summary_within_the_budget() {
        let e = entries(3, 4);
        let full = render(e.clone(), usize::MAX);
        let needed = full.tokens().expect("known");
        assert_eq!(render(e.clone(), needed), full);
        let summary = render(e, needed - 1);
        assert_eq!(summary.mode, RenderMode::Summary);
        let tokens = count_tokens(&summary.body).expect("count");
        assert_eq!(summary.tokens().expect("known"), tokens);
        assert!(
            tokens < needed,
            "{tokens} tokens for a budget of {}",
            needed - 1
        );
        assert!(summary.body.starts_with(
            "Function catalog summary: 13 functions in 3 namespaces plus the top level"
        ));
        // The top level comes first among the namespace lines.
        let first_group = summary.body.lines().nth(1).unwrap_or_default();
        assert!(
            first_group.starts_with("(top level)  [1 function, "),
            "{first_group}"
        );
    }

    #[test]
    fn whole_namespaces_fill_the_budget_smallest_first() {
        let mut e = entries(0, 0);
        e.extend((0..2).map(|f| function(&format!("small.f{f}"))));
        e.extend((0..30).map(|f| function(&format!("large.f{f:02}"))));
        let full = render(e.clone(), usize::MAX).tokens().expect("known");
        let s = render(e, full / 2);
        assert_eq!(s.mode, RenderMode::Summary);
        assert!(
            line_of(&s, "small").is_some_and(|l| l.contains("2 functions, complete")),
            "{}",
            s.body
        );
        assert!(
            line_of(&s, "large").is_some_and(|l| l.contains("partial: 0 shown")),
            "{}",
            s.body
        );
        assert!(line_of(&s, "small.f1").is_some());
        assert!(line_of(&s, "large.f00").is_none());
        assert!(s.tokens().expect("known") <= full / 2);
    }

    #[test]
    fn pinned_functions_and_namespaces_are_always_shown() {
        let mut e = entries(40, 10);
        e[5] = e[5].clone().with_pinned(true);
        let pinned_fn = e[5].name.clone();
        e.push(ManifestEntry::namespace("ns07", "Seventh", Origin::Core).with_pinned(true));
        let s = render(e, 200);
        assert_eq!(s.mode, RenderMode::Summary);
        assert!(line_of(&s, &pinned_fn).is_some(), "{}", s.body);
        for f in 0..10 {
            assert!(
                line_of(&s, &format!("ns07.f{f:02}")).is_some(),
                "{}",
                s.body
            );
        }
        assert!(
            line_of(&s, "ns07")
                .is_some_and(|l| l.contains("10 functions, complete") && l.ends_with("— Seventh")),
            "{}",
            s.body
        );
    }

    #[test]
    fn too_many_namespaces_for_one_line_each_become_an_index() {
        let e = entries(300, 2);
        let budget = 400;
        let s = render(e, budget);
        assert_eq!(s.mode, RenderMode::Summary);
        assert!(s
            .body
            .starts_with("Function catalog index: 601 functions in 301 namespaces"));
        let tokens = count_tokens(&s.body).expect("count");
        assert_eq!(s.tokens().expect("known"), tokens);
        assert!(tokens <= budget, "{tokens} tokens for a budget of {budget}");
        let more = s
            .items
            .iter()
            .find(|i| i.name == "(not listed)")
            .expect("a count of the namespaces not listed");
        assert!(more.line.starts_with("Not listed: "), "{}", more.line);
        assert!(
            s.body.contains("(top level) (1), ns00 (2), ns01 (2)"),
            "{}",
            s.body
        );
    }

    #[test]
    fn load_order_does_not_change_a_byte() {
        let e = entries(12, 5);
        let mut reversed = e.clone();
        reversed.reverse();
        for budget in [usize::MAX, 300, 120] {
            let a = render(e.clone(), budget);
            let b = render(reversed.clone(), budget);
            assert_eq!(a, b, "budget {budget}");
        }
    }

    #[test]
    fn group_lines_state_count_and_completeness() {
        let funcs = [function("git.a"), function("git.b"), function("git.c")];
        let group = Group {
            name: "git",
            summary: "Git helpers",
            funcs: funcs.iter().collect(),
            shown: vec![true, false, false],
            complete: false,
        };
        assert_eq!(
            group.line(),
            "git  [namespace, 3 functions, partial: 1 shown]  — Git helpers"
        );
        assert_eq!(
            group.line_as(true),
            "git  [namespace, 3 functions, complete]  — Git helpers"
        );
        let (a, b) = (&funcs[1], &funcs[2]);
        let hidden = [a, b]
            .iter()
            .map(|e| e.name.len() + e.signature.len() + e.summary.len() + 6)
            .sum::<usize>();
        assert_eq!(group.hidden_bytes(), hidden);
        let top = Group {
            name: "",
            summary: "",
            funcs: funcs[..1].iter().collect(),
            shown: vec![true],
            complete: true,
        };
        assert_eq!(top.line(), "(top level)  [1 function, complete]");
    }
}
