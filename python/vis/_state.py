"""Per-block state the runner sets and the prelude functions read."""
from __future__ import annotations

from typing import Any

#: The `session` dict of the running block.
session: dict[str, Any] = {}
#: Where artifacts of the running block go (full outputs that were cut).
artifact_dir: str = ""
#: Output cap in characters.
output_limit: int = 20_000
#: Workspace roots of the session; the first one is the working directory.
workspace_roots: list[str] = []
#: Counter for artifact names within one block.
artifact_seq: int = 0


def next_artifact(prefix: str) -> str:
    """A fresh artifact path inside the block's artifact directory."""
    global artifact_seq
    artifact_seq += 1
    tag = "t%s-i%s" % (session.get("turn", 0), session.get("iteration", 0))
    return "%s/%s-%s%d.txt" % (artifact_dir, tag, prefix, artifact_seq)


#: True inside a vis worker (set at start-up); False in a plain Python, where `vis.extension`
#: records registrations and worker-only calls raise `WorkerRequiredError`.
in_worker: bool = False
#: Vis's cache directory (read-only for the worker: the host writes what it reports), if any.
cache_dir: str | None = None
#: Digest of the embedded prelude and bundled extensions (part of the signature cache's keys).
prelude_digest: str | None = None
#: The workspace the worker was started for (extensions and skills under `.vis/`), if any.
workspace: str | None = None
#: The user's config directory (`extensions/`, `skills/`), if any.
config_dir: str | None = None
#: Load only the bundled extensions: the host found that the others stop the worker.
safe_mode: bool = False
#: The user trusts this workspace: its own code (`.vis/extensions`, a workspace venv's `.pth`
#: files) may load.
trusted: bool = False
