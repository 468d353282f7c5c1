"""Skills: folders holding a `SKILL.md` whose YAML front matter gives `name` and `description`.

Found in `<workspace>/.vis/skills/*/` and `<config>/skills/*/`; the workspace wins on equal
names. The front matter is parsed by a real YAML parser in Rust (`_native.front_matter`), so
folded (`>`) and literal (`|`) blocks, quoting and comments mean what YAML says. A skill that
cannot be read (bad YAML, no `name` or `description`, an invalid name) is skipped: the next
block's output says so once, and `session["extensions"]["skill:FOLDER"]` holds the error.

An untrusted workspace's skills are named but not shown: their summary and `doc` say the
workspace is not trusted and where the file is, never what it says (anyone who wrote the
repository wrote it), and the user's own skill of the same name wins. `vis trust` brings them in.
"""
from __future__ import annotations

import os

from vis import _state
from vis._extensions.registry import registry

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any


#: What an untrusted workspace's skill shows instead of its description.
WITHHELD_SUMMARY = "a skill of this untrusted workspace: its text is withheld until the user trusts it (vis trust)"


def _roots() -> list[tuple[str, str]]:
    """Where skills come from, the winning source first (on equal names)."""
    roots = []
    if _state.workspace:
        roots.append(("workspace", os.path.join(_state.workspace, ".vis", "skills")))
    if _state.config_dir:
        roots.append(("config", os.path.join(_state.config_dir, "skills")))
    if not _state.trusted:
        roots.reverse()
    return roots


def _withheld_doc(name: str, path: str, workspace: str) -> str:
    return (
        "# %s (withheld)\n\nThis skill comes from the workspace (%s), which the user has not trusted, so its "
        "text is not shown as instructions: anyone who wrote the repository could have written it. The user can "
        "trust the workspace with `vis trust %s`; its files stay readable as data (cat).\n" % (name, path, workspace)
    )


def read_skill(path: str) -> tuple[str, str, str]:
    """`(name, description, text)` of one SKILL.md; ValueError or OSError says what is wrong."""
    from vis import _native

    with open(path, encoding="utf-8") as f:
        text = f.read()
    meta = _native.front_matter(text)
    name = meta.get("name", "").strip()
    if not name:
        raise ValueError("its front matter has no `name:` (a skill needs `name` and `description`)")
    description = " ".join(meta.get("description", "").split())
    if not description:
        raise ValueError("its front matter has no `description:` (a skill needs `name` and `description`)")
    _native.validate_name(name, "skill")
    return name, description, text


def collect_skills() -> None:
    """Fills `registry.skill_entries`; problems go to the notices and `registry.status`."""
    skills: dict[str, dict[str, Any]] = {}
    for source, root in _roots():
        if not os.path.isdir(root):
            continue
        for folder in sorted(os.listdir(root)):
            path = os.path.join(root, folder, "SKILL.md")
            if folder.startswith(".") or not os.path.isfile(path):
                continue
            try:
                name, description, text = read_skill(path)
            except (OSError, UnicodeDecodeError, ValueError) as e:
                registry.notices.append("[vis] skill %s is skipped: %s" % (path, e))
                registry.status.setdefault("skill:" + folder, {"source": source, "path": path, "error": str(e)})
                continue
            if name in skills:
                continue  # the first source wins (see _roots)
            if source == "workspace" and not _state.trusted:
                description, text = WITHHELD_SUMMARY, _withheld_doc(name, path, _state.workspace or "")
            skills[name] = {"name": name, "kind": "skill", "summary": description, "doc": text, "origin": "core"}
    registry.skill_entries = list(skills.values())
