use vis::catalog::count_tokens;
use vis::catalog::{
    render_catalog, render_catalog_text, EntryKind, Manifest, ManifestEntry, Origin, RenderMode,
    DEFAULT_BUDGET_TOKENS,
};

use super::{big, core_fn, ext_fn, sample, shuffle};

#[test]
fn small_catalog_inlines_everything() {
    let m = Manifest::new(sample()).unwrap();
    let s = render_catalog(&m, DEFAULT_BUDGET_TOKENS).unwrap();
    assert_eq!(s.mode, RenderMode::Full);
    assert_eq!(
        s.body,
        "Functions available in python_execution (call them directly; doc(name) shows full documentation, apropos(pattern) searches names):\n\
         apropos(pattern, namespace=None, limit=50, offset=0)  — Filter public names with a regex.\n\
         cat(path, start=None, end=None)  — Print a file with line addresses.\n\
         doc(name)  — Show the documentation of a name.\n\
         git.diff(path=None, staged=False)  — Show the diff of the working tree.\n\
         git.log(n=10)  — Show recent commits.\n\
         git.status()  — Show the working tree status.\n\
         tests.run(pattern=None)  — Run the workspace's tests.\n\
         release-checklist  [skill]  — How to cut a release\n\
         vis.addresses  [page]  — Addresses\n"
    );
    assert_eq!(s.hash, blake3::hash(s.body.as_bytes()).to_hex().to_string());
    assert_eq!(s.tokens().unwrap(), count_tokens(&s.body).unwrap());
    assert_eq!(s.items.len(), 9);
    let text = render_catalog_text(&m, DEFAULT_BUDGET_TOKENS).unwrap();
    assert!(
        text.starts_with(&s.body) && text.ends_with(&format!("hash: {}\n", s.hash)),
        "{text}"
    );
    assert!(text.contains("mode: full, "));
}

#[test]
fn mode_switches_exactly_at_the_budget() {
    for entries in [sample(), big(60, 7)] {
        let m = Manifest::new(entries).unwrap();
        let full = render_catalog(&m, usize::MAX).unwrap();
        assert_eq!(full.mode, RenderMode::Full);
        let t = full.tokens().unwrap();
        assert_eq!(t, count_tokens(&full.body).unwrap());
        let at = render_catalog(&m, t).unwrap();
        assert_eq!(at.mode, RenderMode::Full);
        assert_eq!(at, full);
        let below = render_catalog(&m, t - 1).unwrap();
        assert_eq!(below.mode, RenderMode::Summary);
        assert_eq!(below.tokens().unwrap(), count_tokens(&below.body).unwrap());
    }
}

#[test]
fn same_entries_in_any_load_order_render_identical_bytes() {
    let mut entries = big(400, 37);
    entries.extend(sample());
    entries.push(
        ManifestEntry::namespace("ns003", "Third", Origin::Extension("ns003".into()))
            .with_pinned(true),
    );
    entries[5].pinned = true;
    let reference_full =
        render_catalog(&Manifest::new(entries.clone()).unwrap(), usize::MAX).unwrap();
    let reference_sum = render_catalog(&Manifest::new(entries.clone()).unwrap(), 2_000).unwrap();
    assert_eq!(reference_sum.mode, RenderMode::Summary);
    for seed in 1..8u64 {
        let mut e = entries.clone();
        shuffle(&mut e, seed);
        let m = Manifest::new(e).unwrap();
        let full = render_catalog(&m, usize::MAX).unwrap();
        assert_eq!(full.body, reference_full.body);
        assert_eq!(full.hash, reference_full.hash);
        let sum = render_catalog(&m, 2_000).unwrap();
        assert_eq!(sum.body, reference_sum.body, "seed {seed}");
        assert_eq!(sum.hash, reference_sum.hash);
        assert_eq!(sum.items, reference_sum.items);
    }
}

#[test]
fn summary_lists_namespaces_with_counts_and_pinned_signatures() {
    let mut entries = big(500, 100); // ns000..ns004, 100 functions each
    entries.push(core_fn("doc", "(name)", "Show documentation.").with_pinned(true));
    entries.push(core_fn("cat", "(path)", "Print a file."));
    entries.push(ext_fn("ns002", "ns002.func_special", "(x)", "Pinned one.").with_pinned(true));
    entries.push(ManifestEntry::namespace(
        "ns004",
        "Fourth namespace",
        Origin::Extension("ns004".into()),
    ));
    entries.push(ext_fn("git", "git.diff", "(path=None)", "Show the diff."));
    entries.push(ext_fn("git", "git.log", "(n=10)", "Show commits."));
    entries
        .push(ManifestEntry::page("vis.folding", "How to fold.", Origin::Core).with_pinned(true));
    entries.push(ManifestEntry::page(
        "vis.addresses",
        "How addresses work.",
        Origin::Core,
    ));
    let m = Manifest::new(entries).unwrap();
    let s = render_catalog(&m, 600).unwrap();
    assert_eq!(s.mode, RenderMode::Summary);
    let b = &s.body;
    assert!(
        b.starts_with("Function catalog summary: 505 functions in 6 namespaces plus the top level"),
        "{b}"
    );
    // Top level first; pinned `doc` shown; the small `git` namespace filled in completely.
    assert!(b.contains("\n(top level)  [2 functions, complete]\ncat(path)  — Print a file.\ndoc(name)  — Show documentation.\n"), "{b}");
    assert!(b.contains("\ngit  [namespace, 2 functions, complete]\ngit.diff(path=None)  — Show the diff.\ngit.log(n=10)  — Show commits.\n"), "{b}");
    assert!(b.contains("\nns002  [namespace, 101 functions, partial: 1 shown]\nns002.func_special(x)  — Pinned one.\nns003"), "{b}");
    assert!(
        b.contains("\nns004  [namespace, 100 functions, partial: 0 shown]  — Fourth namespace\n"),
        "{b}"
    );
    assert!(
        b.contains("\nvis.folding  [page]  — How to fold.\nPages and skills not shown: 1;"),
        "{b}"
    );
    assert!(!b.contains("func_00001"));
    assert!(s.tokens().unwrap() <= 600);
    assert_eq!(s.tokens().unwrap(), count_tokens(b).unwrap());
    let kinds: Vec<(String, EntryKind)> =
        s.items.iter().map(|i| (i.name.clone(), i.kind)).collect();
    assert!(kinds.contains(&("".into(), EntryKind::Namespace)));
    assert!(kinds.contains(&("ns002.func_special".into(), EntryKind::Function)));

    // With a tiny budget even one line per namespace does not fit: the index keeps only the
    // pinned entries under their namespace lines and counts the namespaces it cannot list.
    let tiny = render_catalog(&m, 10).unwrap();
    assert!(
        tiny.body
            .contains("(top level)  [2 functions, partial: 1 shown]\ndoc(name)"),
        "{}",
        tiny.body
    );
    assert!(!tiny.body.contains("git  [namespace"), "{}", tiny.body);
    assert!(tiny.body.contains("Not listed: "), "{}", tiny.body);
}

#[test]
fn pinned_namespace_shows_all_its_functions() {
    let mut entries = big(300, 100);
    entries.push(
        ManifestEntry::namespace("ns001", "", Origin::Extension("ns001".into())).with_pinned(true),
    );
    let m = Manifest::new(entries).unwrap();
    let s = render_catalog(&m, 100).unwrap();
    assert_eq!(s.mode, RenderMode::Summary);
    assert!(s
        .body
        .contains("ns001  [namespace, 100 functions, complete]\nns001.func_00100"));
    assert_eq!(s.body.matches("ns001.func_").count(), 100);
}

#[test]
fn token_counts_are_line_additive() {
    // Unicode, digits, punctuation, arrows, slashes inside lines: the per-line sum must equal
    // the count of the whole body in both modes.
    let mut entries = big(300, 30);
    entries.push(core_fn(
        "path_join",
        "(*parts: str) -> str",
        "Join /usr/bin and ./x — 'quoted' \"double\" 12345678 ümlaut 中文 🙂",
    ));
    entries.push(core_fn("_private", "()", "//comment-like /slash start"));
    let m = Manifest::new(entries).unwrap();
    for budget in [usize::MAX, 1_500, 0] {
        let s = render_catalog(&m, budget).unwrap();
        let cached = s.tokens().unwrap();
        assert_eq!(cached, count_tokens(&s.body).unwrap(), "budget {budget}");
    }
}

#[test]
fn no_visible_function_means_empty_catalog() {
    let m = Manifest::new(vec![ManifestEntry::page(
        "vis.addresses",
        "x",
        Origin::Core,
    )])
    .unwrap();
    let s = render_catalog(&m, 2_000).unwrap();
    assert_eq!(s.mode, RenderMode::Empty);
    assert!(s.is_empty() && s.body.is_empty() && s.items.is_empty());
    assert_eq!(s.tokens().unwrap(), 0);
    assert!(render_catalog_text(&m, 2000)
        .unwrap()
        .contains("catalog and its instructions are omitted"));
    let none = Manifest::new(vec![]).unwrap();
    assert!(render_catalog(&none, 2_000).unwrap().is_empty());
}

#[test]
fn snapshots_are_content_addressed() {
    let m = Manifest::new(sample()).unwrap();
    let a = render_catalog(&m, 2_000).unwrap();
    let b = render_catalog(&m, 50_000).unwrap();
    assert_eq!(
        a.hash, b.hash,
        "same bytes, same address, whatever the budget"
    );
    let mut more = sample();
    more[0].signature = "(pattern)".into();
    let c = render_catalog(&Manifest::new(more).unwrap(), 2_000).unwrap();
    assert_ne!(a.hash, c.hash);
    assert_eq!(a.hash.len(), 64);
}

#[test]
fn tokenizer_counts_o200k() {
    vis::catalog::warm_up_tokenizer().unwrap();
    assert_eq!(count_tokens("hello world").unwrap(), 2);
    assert_eq!(count_tokens("").unwrap(), 0);
    // Special-token text is ordinary text here.
    assert!(count_tokens("<|endoftext|>").unwrap() > 1);
}

#[test]
fn too_many_namespaces_fall_back_to_an_index_within_the_budget() {
    // 500 namespaces of 10 functions: one summary line per namespace alone is ~8k tokens.
    let mut entries = big(5_000, 10);
    entries[4_321].pinned = true;
    let pinned = entries[4_321].name.clone();
    let m = Manifest::new(entries.clone()).unwrap();
    let s = render_catalog(&m, DEFAULT_BUDGET_TOKENS).unwrap();
    assert_eq!(s.mode, RenderMode::Summary);
    let tokens = count_tokens(&s.body).unwrap();
    assert!(tokens <= DEFAULT_BUDGET_TOKENS, "{tokens} tokens");
    assert_eq!(s.tokens().unwrap(), tokens);
    assert!(
        s.body
            .starts_with("Function catalog index: 5000 functions in 500 namespaces"),
        "{}",
        &s.body[..200]
    );
    // The pinned function is always shown, under its namespace line.
    assert!(s.body.contains(&format!("\n{pinned}(")), "{}", s.body);
    assert!(
        s.body.contains("ns000 (10), ns001 (10)"),
        "{}",
        &s.body[..600]
    );
    assert!(
        s.body
            .contains("more namespaces; apropos('.') lists every name."),
        "{}",
        s.body
    );
    // Same bytes in any load order.
    shuffle(&mut entries, 7);
    let again = render_catalog(&Manifest::new(entries).unwrap(), DEFAULT_BUDGET_TOKENS).unwrap();
    assert_eq!(again.hash, s.hash);
    // A budget big enough for every namespace line keeps the ordinary summary.
    let roomy = render_catalog(&m, 20_000).unwrap();
    assert!(
        roomy.body.starts_with("Function catalog summary:"),
        "{}",
        &roomy.body[..100]
    );
}
