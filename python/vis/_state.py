"""The worker's settings (given once, at start) and the per-block state the runner sets; the
prelude functions read both. Nothing here imports another module of `vis`: every layer may
read it.
"""
from __future__ import annotations

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, TypedDict

    class Settings(TypedDict):
        """What the worker tells the prelude at start, in one object: the Rust struct
        `runtime::child::PreludeSettings` turned into a dict (a test ties the two together).
        Outside a worker nobody calls `configure`, and the defaults below stand."""

        #: The workspace the worker was started for (extensions and skills under `.vis/`).
        workspace: str | None
        #: The user's config directory (`extensions/`, `skills/`).
        config_dir: str | None
        #: Vis's cache directory for this workspace (read-only for the worker: the host writes
        #: what it reports).
        cache_dir: str | None
        #: Digest of the embedded prelude and bundled extensions (part of the signature
        #: cache's keys).
        prelude_digest: str
        #: Load only the bundled extensions: the host found that the others stop the worker.
        safe_mode: bool
        #: The user trusts this workspace: its own code (`.vis/extensions`, a workspace venv's
        #: `.pth` files) may load.
        trusted: bool



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
#: When the running block's timeout expires (`time.monotonic()`), None between blocks:
#: `Job.wait` returns before it.
block_deadline: float | None = None


def next_artifact(prefix: str) -> str:
    """A fresh artifact path inside the block's artifact directory."""
    global artifact_seq
    artifact_seq += 1
    tag = "t%s-i%s" % (session.get("turn", 0), session.get("iteration", 0))
    return "%s/%s-%s%d.txt" % (artifact_dir, tag, prefix, artifact_seq)


#: True inside a vis worker (set by `configure`); False in a plain Python, where
#: `vis.extension` records registrations and worker-only calls raise `WorkerRequiredError`.
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


def configure(settings: Settings) -> None:
    """Takes the worker's settings; called once by the worker, before the runner starts."""
    global in_worker, cache_dir, prelude_digest, workspace, config_dir, safe_mode, trusted
    workspace = settings["workspace"]
    config_dir = settings["config_dir"]
    cache_dir = settings["cache_dir"]
    prelude_digest = settings["prelude_digest"]
    safe_mode = settings["safe_mode"]
    trusted = settings["trusted"]
    in_worker = True
