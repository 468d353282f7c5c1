//! `vis-worker`: the process each live session's Python runs in, started by `vis` (see
//! `runtime::child`). It is a binary of its own so that `vis` does not link libpython: loading
//! and relocating that library is a millisecond of every `vis` start, and only workers use it.

fn main() {
    std::process::exit(vis::runtime::run_worker());
}
