//! Discovery benchmarks through the real worker and the Python wrappers (plain `main`,
//! medians). Run: `cargo bench --bench discovery`.
//!
//! A workspace extension registers 5,000 functions (500 namespaces × 10, like the catalog
//! bench); blocks then time `apropos(...)`/`doc(...)` as the model calls them (Python wrapper →
//! native manifest → text). Budget from the spec: `apropos` over 5,000 entries ≤ 5 ms.

// Tests and benchmarks may panic on failure and print what they measure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use vis::protocol::Block;
use vis::runtime::{NoHostCalls, Runtime, WorkerOptions};

const EXTENSION: &str = r#"from vis.extension import register

def _make(i):
    def f(path, limit=40, *, verbose=False):
        return i
    f.__doc__ = "Do thing number %d with the given path and report what happened.\n\nMore text." % i
    f.__name__ = "func_%05d" % i
    return f

for _i in range(5000):
    register(_make(_i), "ns%03d.func_%05d" % (_i // 10, _i), pinned=_i % 500 == 0)
"#;

const TIMING: &str = r#"import time, statistics
def bench(label, fn, runs=201):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    print("%-52s %8.3f ms" % (label, statistics.median(times) * 1e3))
print("manifest rows:", apropos('.', limit=1).total)
bench("apropos('diff')  (no match, suggestions)", lambda: repr(apropos('diff')))
bench("apropos('.')  (all match, first page of 50)", lambda: repr(apropos('.')))
bench("apropos('func_0[0-9]{3}7$')", lambda: repr(apropos('func_0[0-9]{3}7$')))
bench("apropos('(?i)FUNC', namespace='ns007')", lambda: repr(apropos('(?i)FUNC', namespace='ns007')))
bench("apropos('.', offset=4000)  (deep page)", lambda: repr(apropos('.', offset=4000)))
bench("doc('ns042.func_00421')", lambda: repr(doc('ns042.func_00421')))
bench("doc('ns042')  (namespace, 10 members)", lambda: repr(doc('ns042')))
def unknown():
    try:
        doc('nsx42.func_00421x')
    except LookupError:
        pass
bench("doc(unknown)  (LookupError with suggestions)", unknown, runs=51)
"#;

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("workspace");
    std::fs::create_dir_all(ws.join(".vis/extensions"))?;
    std::fs::write(ws.join(".vis/extensions/bulk.py"), EXTENSION)?;
    let mut opts = WorkerOptions::new(PathBuf::from(env!("CARGO_BIN_EXE_vis-worker")));
    opts.workspace = Some(ws.clone());

    // Start-up with and without the 5,000-function extension (medians of 5).
    for (label, with) in [
        ("worker start, prelude + git + tests", false),
        ("worker start + 5,000-function extension", true),
    ] {
        let mut times = Vec::new();
        for _ in 0..5 {
            let mut o = opts.clone();
            if !with {
                o.workspace = Some(dir.path().to_path_buf());
            }
            let mut rt = Runtime::new(o, vec![]);
            let t = Instant::now();
            rt.start()?;
            times.push(t.elapsed());
            rt.shutdown();
        }
        times.sort();
        println!("{label:<52} {:>11}", ms(times[2]));
    }

    let mut rt = Runtime::new(opts, vec![]);
    rt.start()?;
    println!(
        "manifest entries received by the host: {}",
        rt.manifest_entries().len()
    );
    let t = Instant::now();
    let m = rt.manifest()?;
    println!(
        "host: Manifest::new from the received entries: {}",
        ms(t.elapsed())
    );
    drop(m);
    let art = dir.path().join("artifacts");
    let out = rt.exec(
        Block {
            code: TIMING.to_string(),
            filename: "<t1/i1>".into(),
            session: vis::protocol::SessionInfo::new(
                "s",
                1,
                1,
                vis::protocol::SessionCounts::default(),
                vis::protocol::Utilization::without_requests(),
            ),
            output_limit: 20_000,
            artifact_path: art.join("t1-i1.txt"),
            artifact_dir: art,
            workspace_roots: vec![ws],
            timeout: Duration::from_secs(600),
            artifact_quota: vis::runtime::DEFAULT_ARTIFACT_QUOTA,
        },
        &mut NoHostCalls,
    )?;
    print!("{}", out.output);
    Ok(())
}
