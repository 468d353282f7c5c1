//! Integration tests of the catalog core (`vis::catalog`).

mod apropos;
mod doc;
mod manifest;
mod names;
mod permissions;
mod render;
mod store;
mod update;

use vis::catalog::{ManifestEntry, Origin};

/// A core function.
pub fn core_fn(name: &str, sig: &str, doc: &str) -> ManifestEntry {
    ManifestEntry::function(name, sig, doc, Origin::Core)
}

/// An extension function.
pub fn ext_fn(ext: &str, name: &str, sig: &str, doc: &str) -> ManifestEntry {
    ManifestEntry::function(name, sig, doc, Origin::Extension(ext.into()))
}

/// A small realistic manifest: prelude, `git` and `tests` extensions, a page, a skill.
pub fn sample() -> Vec<ManifestEntry> {
    vec![
        core_fn(
            "apropos",
            "(pattern, namespace=None, limit=50, offset=0)",
            "Filter public names with a regex.\n\nLonger text.",
        ),
        core_fn("doc", "(name)", "Show the documentation of a name."),
        core_fn(
            "cat",
            "(path, start=None, end=None)",
            "Print a file with line addresses.",
        ),
        ManifestEntry::page(
            "vis.addresses",
            "# Addresses\n\nEvery line has an address.",
            Origin::Core,
        ),
        ext_fn("git", "git.status", "()", "Show the working tree status."),
        ext_fn(
            "git",
            "git.diff",
            "(path=None, staged=False)",
            "Show the diff of the working tree.",
        ),
        ext_fn("git", "git.log", "(n=10)", "Show recent commits."),
        ManifestEntry::namespace("git", "Git helpers", Origin::Extension("git".into())),
        ext_fn(
            "tests",
            "tests.run",
            "(pattern=None)",
            "Run the workspace's tests.",
        ),
        ManifestEntry::skill(
            "release-checklist",
            "How to cut a release",
            "---\nname: release-checklist\ndescription: How to cut a release\n---\nSteps.",
            Origin::Core,
        ),
    ]
}

/// `n` functions spread over `n / per_ns` namespaces `ns000`…, with realistic-looking lines.
pub fn big(n: usize, per_ns: usize) -> Vec<ManifestEntry> {
    (0..n)
        .map(|i| {
            let ns = format!("ns{:03}", i / per_ns);
            ext_fn(
                &ns,
                &format!("{ns}.func_{i:05}"),
                &format!("(path, limit={}, *, verbose=False) -> dict", i % 97),
                &format!("Do thing number {i} with the given path (é, 数, 42%).\n\nMore."),
            )
        })
        .collect()
}

/// Deterministic shuffle (xorshift), so tests need no RNG crate.
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut x = seed | 1;
    for i in (1..items.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        items.swap(i, (x % (i as u64 + 1)) as usize);
    }
}
