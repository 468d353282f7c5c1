# A first block: look around a workspace, keep a helper for later blocks, read by address.
from collections import Counter


def count_lines(pattern="**/*.rs"):
    """Count lines per file matching `pattern` under the workspace; biggest first."""
    sizes = Counter()
    for path in Path(".").glob(pattern):
        if path.is_file() and "target" not in path.parts:
            sizes[str(path)] = len(path.read_bytes().splitlines())
    return sizes.most_common()


top = count_lines()
print(f"{len(top)} Rust files, {sum(n for _, n in top)} lines; largest:")
for name, n in top[:5]:
    print(f"  {n:6} {name}")
# Every line grep and cat show carries an address that patch() accepts.
print(grep(r"pub fn (exec|start)\b", "src/runtime", limit=5))
print(cat("Cargo.toml", 1, 4))
print(sh("git log --oneline | head -3"))
defs()
