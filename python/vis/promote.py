"""`promote`: turn a helper from `defs()` into an extension of the workspace."""
from __future__ import annotations

import os

from vis import _extensions, _state
from vis.defs import current_registry

_HEADER = '''"""Helpers promoted from vis sessions with promote(); they load in every session of this
workspace. Edit freely: each function is registered with @register."""
from vis.extension import register
'''


class PromoteResult(str):
    """What `promote` did; prints as one line."""

    def __repr__(self) -> str:
        return str(self)


def _used_names(source: str) -> set[str]:
    import ast

    return {n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)}


def promote(name: str, extension: str = "helpers") -> PromoteResult:
    """Make a helper from `defs()` permanent: write it into a workspace extension.

    The function `name` goes into `.vis/extensions/<extension>.py`, registered as
    `<extension>.<name>`.

    From then on it loads in every session of this workspace (and in this one right away):
    call it as `helpers.name(...)`; `doc('helpers.name')` shows its docstring. Promoting the
    same name again replaces the earlier version. The imports it uses (from `defs()`) are
    copied along.
    """
    import ast
    import inspect
    import textwrap

    from vis import _native

    if not isinstance(name, str) or not name:
        raise TypeError("promote() takes the name of a function from defs(), e.g. promote('slugify')")
    try:
        _native.validate_name(extension, "namespace")
    except ValueError as e:
        raise ValueError("invalid extension name %r: %s" % (extension, e)) from None
    if "." in extension:
        raise ValueError("invalid extension name %r: use one identifier such as 'helpers' (it becomes a file name)" % extension)
    registry = current_registry()
    entries = registry.entries if registry is not None else {}
    record = entries.get(name)
    # The live function wins: it may have been (re)defined earlier in the running block,
    # before the block's definitions are recorded.
    live = (_extensions.registry.ns or {}).get(name)
    if inspect.isfunction(live) and live.__code__.co_filename.startswith(("<t", "<def ")):
        try:
            live_source = textwrap.dedent(inspect.getsource(live))
            tree = ast.parse(live_source)
        except (OSError, TypeError, SyntaxError):
            pass
        else:
            # Only if the cached block text still holds this very definition.
            if (
                len(tree.body) == 1
                and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef))
                and tree.body[0].name == name
            ):
                record = {"kind": "function", "source": live_source}
    if record is None or record.get("kind") != "function":
        functions = [n for n, e in entries.items() if e.get("kind") == "function"]
        hint = ("; defined functions: " + ", ".join(functions[:20])) if functions else "; define it with a top-level def first"
        what = "is a %s, not a function" % record["kind"] if record else "is not a function in defs()"
        raise LookupError("cannot promote %r: it %s%s" % (name, what, hint))
    if not _state.workspace:
        raise RuntimeError("promote() needs a workspace: this worker was started without one")
    source: str = record["source"]
    used = _used_names(source)
    imports = [e["source"] for n, e in entries.items() if e.get("kind") == "import" and n.split(".")[0] in used]

    directory = os.path.join(_state.workspace, ".vis", "extensions")
    path = os.path.join(directory, extension + ".py")
    existing = _HEADER
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            existing = f.read()
    lines = existing.splitlines(True)
    try:
        tree = ast.parse(existing)
    except SyntaxError as e:
        raise ValueError("%s has a syntax error (line %s): fix it before promoting into it" % (path, e.lineno)) from None
    # Replace an earlier version of the same function (decorators included).
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            del lines[start - 1 : node.end_lineno]
            break
    text = "".join(lines)
    if text and not text.endswith("\n"):
        text += "\n"
    present = set(text.splitlines())
    new_imports = [imp for imp in imports if imp.rstrip("\n") not in present]
    block = "".join(new_imports) + '\n\n@register("%s.%s")\n%s' % (extension, name, source if source.endswith("\n") else source + "\n")
    text = text.rstrip("\n") + "\n" + block
    compile(text, path, "exec")
    # `.vis` is read-only inside the sandbox (it also holds the MCP commands the host runs):
    # the host writes this one file.
    _native.host_call("write_extension", {"extension": extension, "text": text})
    _extensions.reload_extension(extension)
    status = _extensions.registry.status.get(extension, {})
    if status.get("error"):
        return PromoteResult(
            "wrote %s.%s to %s, but the extension failed to load: %s" % (extension, name, path, status["error"])
        )
    if status.get("source") not in (None, "workspace"):
        return PromoteResult("wrote %s.%s to %s, but extension `%s` from %s takes priority" % (extension, name, path, extension, status["source"]))
    return PromoteResult(
        "promoted %s -> %s.%s in %s; it loads in every session of this workspace (call %s.%s(...))"
        % (name, extension, name, path, extension, name)
    )
