"""The objects the model calls: one `Namespace` per top-level name (`git`, `slack`), whose
attributes are its members (functions and nested namespaces)."""
from __future__ import annotations

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from typing import Any, Callable


class Namespace:
    """A namespace in the model's namespace (`git`, `slack.admin`): attributes are its members;
    calling it calls the function of the same path, if there is one."""

    __slots__ = ("_path", "_function", "_members")

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_function", None)
        object.__setattr__(self, "_members", {})

    def __getattr__(self, attr: str) -> Any:
        members = object.__getattribute__(self, "_members")
        if attr in members:
            return members[attr]
        path = object.__getattribute__(self, "_path")
        raise AttributeError(
            "namespace '%s' has no attribute '%s'; doc('%s') lists its members" % (path, attr, path)
        )

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError("namespace '%s' is read-only" % path_of(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        function = object.__getattribute__(self, "_function")
        if function is None:
            path = path_of(self)
            raise TypeError("namespace '%s' is not callable; doc('%s') lists its members" % (path, path))
        return function(*args, **kwargs)

    def __dir__(self) -> list[str]:
        return sorted(object.__getattribute__(self, "_members"))

    def __repr__(self) -> str:
        n = len(object.__getattribute__(self, "_members"))
        path = path_of(self)
        return "<namespace %s: %d member%s; doc('%s') lists them>" % (path, n, "" if n == 1 else "s", path)


def path_of(ns: Namespace) -> str:
    """The dotted path of a namespace object (not an attribute: members own those names)."""
    path: str = object.__getattribute__(ns, "_path")
    return path


def _members(ns: Namespace) -> dict[str, Any]:
    members: dict[str, Any] = object.__getattribute__(ns, "_members")
    return members


def build_objects(visible: list[str], functions: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Top-level name -> object for the `visible` function names (manifest order) that have
    a function."""
    names = [n for n in visible if n in functions]
    spaces: dict[str, Namespace] = {}

    def space(path: str) -> Namespace:
        ns = spaces.get(path)
        if ns is None:
            ns = spaces[path] = Namespace(path)
            if "." in path:
                parent, leaf = path.rsplit(".", 1)
                _members(space(parent))[leaf] = ns
        return ns

    for name in names:
        if "." in name:
            space(name.rsplit(".", 1)[0])
    top: dict[str, Any] = {}
    for name in names:
        fn = functions[name]
        if name in spaces:
            object.__setattr__(spaces[name], "_function", fn)
        elif "." in name:
            parent, leaf = name.rsplit(".", 1)
            _members(spaces[parent])[leaf] = fn
        else:
            top[name] = fn
    for path, obj in spaces.items():
        if "." not in path:
            top[path] = obj
    return top
