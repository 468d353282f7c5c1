//! Catalog benchmarks (plain `main`, medians). Run: `cargo bench --bench catalog`.
//!
//! Budgets from the spec: `apropos` over 5,000 entries ≤ 5 ms; catalog render + hash for 5,000
//! entries ≤ 20 ms (tokenizer load excluded, reported separately).

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use vis::catalog::{
    catalog_update, render_catalog, warm_up_tokenizer, Manifest, ManifestEntry, Origin,
    DEFAULT_BUDGET_TOKENS,
};

fn entries(n: usize, per_ns: usize) -> Vec<ManifestEntry> {
    (0..n)
        .map(|i| {
            let ns = format!("ns{:03}", i / per_ns);
            let mut e = ManifestEntry::function(
                format!("{ns}.func_{i:05}"),
                format!("(path, limit={}, *, verbose=False) -> dict", i % 97),
                format!("Do thing number {i} with the given path and report what happened.\n\nMore text."),
                Origin::Extension(ns),
            );
            e.pinned = i % 500 == 0;
            e
        })
        .collect()
}

fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let load = warm_up_tokenizer()?;
    println!(
        "tokenizer load (o200k_base, first use in process): {}",
        ms(load)
    );

    for (n, per_ns) in [(5_000usize, 100usize), (5_000, 10)] {
        println!("\n== {n} functions, {per_ns} per namespace ==");
        let e = entries(n, per_ns);
        let build = median(21, || Manifest::new(e.clone()));
        println!("manifest build: {}", ms(build));
        let m = Manifest::new(e.clone())?;

        for (pattern, ns) in [
            ("diff", None),
            (".", None),
            ("func_0[0-9]{3}7$", None),
            ("^ns042\\.", None),
            ("(?i)FUNC", Some("ns007")),
        ] {
            let t = median(101, || m.apropos(pattern, ns, 50, 0).map(|p| p.render()));
            let total = m.apropos(pattern, ns, 50, 0)?.total;
            println!(
                "apropos({pattern:?}, namespace={ns:?}) -> {total} matches, page rendered: {}",
                ms(t)
            );
        }

        let t = median(51, || render_catalog(&m, DEFAULT_BUDGET_TOKENS));
        let s = render_catalog(&m, DEFAULT_BUDGET_TOKENS)?;
        println!(
            "render + hash (budget {DEFAULT_BUDGET_TOKENS}, mode {:?}, {} tokens, {} bytes): {}",
            s.mode,
            s.tokens()?,
            s.body.len(),
            ms(t)
        );
        let t_full = median(5, || render_catalog(&m, usize::MAX));
        let full = render_catalog(&m, usize::MAX)?;
        println!(
            "render + hash, unbounded budget (mode {:?}, {} tokens, {} bytes; counts every line): {}",
            full.mode,
            full.tokens()?,
            full.body.len(),
            ms(t_full)
        );

        let mut changed = e.clone();
        changed.truncate(n - 10);
        changed[3].signature = "(changed)".into();
        let s2 = render_catalog(&Manifest::new(changed)?, DEFAULT_BUDGET_TOKENS)?;
        let t = median(51, || catalog_update(&s, &s2));
        println!(
            "catalog_update (summary→summary, {:?}): {}",
            catalog_update(&s, &s2)?.tokens(),
            ms(t)
        );

        let t = median(21, || m.doc("ns001.fnuc_00101"));
        println!("doc(unknown name) with suggestions: {}", ms(t));
    }
    Ok(())
}
