"""Named guards, actions and routers, so a table file stays pure data.

A table names what it calls; a `Registry` resolves the names when the table is compiled.
Entries are either plain callables or factories that take the table's `args` once, at
compile time, and return the callable: parameters cost nothing per event.

Signatures (``ev`` is an `Event`; ``ctx`` a read-only mapping):
  guard(ctx, ev) -> bool
  action(ctx, ev) -> None | dict (context updates) | Effect | Raise | sequence of those
  router(ctx, ev) -> str, one of the router's declared outcomes
"""

from __future__ import annotations

import importlib
import importlib.machinery
import re
import site
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar, overload

Kind = Literal["guard", "action", "router"]


class Event(NamedTuple):
    """What guards and actions see: the event name, its payload, and the dispatch time."""

    name: str
    payload: Any
    time_ns: int


#: The read-only context a guard, action or router sees.
Ctx = Mapping[str, Any]
Guard = Callable[[Ctx, Event], bool]
#: An action returns None, a dict of context updates, an Effect, a Raise, or a sequence of those.
Action = Callable[[Ctx, Event], Any]
Router = Callable[[Ctx, Event], str]

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Entry:
    kind: Kind
    fn: Callable[..., Any]
    factory: bool = False
    outcomes: tuple[str, ...] = ()


@dataclass
class Registry:
    """A namespace of callables a table may name. Later registries override earlier ones."""

    name: str
    entries: dict[str, Entry] = field(default_factory=dict)

    def _add(self, kind: Kind, name: str | None, fn: _F, **kw: Any) -> _F:
        self.entries[name or fn.__name__.rstrip("_")] = Entry(kind, fn, **kw)
        return fn

    # Each decorator works bare (@reg.guard) or with options (@reg.guard(name=..., factory=True))
    # and returns the function unchanged, its type included.
    @overload
    def guard(self, fn: _F, *, name: str | None = None, factory: bool = False) -> _F: ...
    @overload
    def guard(
        self, fn: None = None, *, name: str | None = None, factory: bool = False
    ) -> Callable[[_F], _F]: ...
    def guard(
        self, fn: _F | None = None, *, name: str | None = None, factory: bool = False
    ) -> _F | Callable[[_F], _F]:
        if fn is None:
            return lambda f: self._add("guard", name, f, factory=factory)
        return self._add("guard", name, fn, factory=factory)

    @overload
    def action(self, fn: _F, *, name: str | None = None, factory: bool = False) -> _F: ...
    @overload
    def action(
        self, fn: None = None, *, name: str | None = None, factory: bool = False
    ) -> Callable[[_F], _F]: ...
    def action(
        self, fn: _F | None = None, *, name: str | None = None, factory: bool = False
    ) -> _F | Callable[[_F], _F]:
        if fn is None:
            return lambda f: self._add("action", name, f, factory=factory)
        return self._add("action", name, fn, factory=factory)

    def router(
        self, *, outcomes: Iterable[str], name: str | None = None, factory: bool = False
    ) -> Callable[[_F], _F]:
        return lambda f: self._add("router", name, f, factory=factory, outcomes=tuple(outcomes))

    def merged(self, *others: Registry) -> Registry:
        out = Registry(self.name, dict(self.entries))
        for other in others:
            out.entries.update(other.entries)
        return out


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def load_registry_module(
    path: str, registry_path: Sequence[str | Path] = (), near: str | Path | None = None
) -> Registry:
    """Import ``path`` and return its ``REGISTRY``; errors say which module and why.

    A table is data, but its `registry:` names code to import, so only code the user
    installed or named may run: the module is looked up on ``sys.path`` without the
    current directory and without the table's folder ``near`` (what Python would add
    for a script), plus the folders of ``registry_path`` (`--registry-path DIR`, the
    user's consent to run code from DIR). A module that only a neighbouring file could
    provide is refused, never imported.
    """
    if not _MODULE_NAME.fullmatch(path):
        raise LookupError(f"registry {path!r} is not a module name (e.g. my_package.actions)")
    consented = [str(Path(d)) for d in registry_path]
    untrusted = {Path.cwd().resolve()} - _site_dirs()
    if near is not None:
        untrusted.add(Path(near).resolve())
    untrusted -= {Path(d).resolve() for d in consented}
    trusted = [*consented, *(p for p in sys.path if p and _resolved(p) not in untrusted)]
    saved = sys.path[:]
    try:
        # the import machinery (meta path finders, editable installs, the package's own
        # imports while it runs) sees only the trusted path; restored right after
        sys.path[:] = trusted
        try:
            module = importlib.import_module(path)
        finally:
            sys.path[:] = saved
    except ModuleNotFoundError as exc:
        where = _untrusted_origin(exc.name or path, [*saved, *([str(near)] if near else [])])
        if where is not None:
            raise LookupError(
                f"registry module {path!r} would be imported from {where}, which is not an "
                f"installed package (it is next to the table or in the current directory); "
                f"tables run only installed code: pass --registry-path {where.parent} "
                "to allow code from that folder"
            ) from None
        raise LookupError(f"registry module {path!r} cannot be imported: {exc}") from exc
    except Exception as exc:  # the module's own code failed: say so, do not crash the loader
        raise LookupError(
            f"registry module {path!r} failed while importing: {type(exc).__name__}: {exc}"
        ) from exc
    reg = getattr(module, "REGISTRY", None)
    if not isinstance(reg, Registry):
        raise LookupError(f"registry module {path!r} has no REGISTRY (a Registry instance)")
    return reg


def _resolved(entry: str) -> Path | None:
    try:
        return Path(entry).resolve()
    except OSError:
        return None


def _site_dirs() -> set[Path]:
    """site-packages folders: installed code, even when one is the current directory."""
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return {p for d in dirs if (p := _resolved(d)) is not None}


def _untrusted_origin(missing: str, full_path: list[str]) -> Path | None:
    """Where the refused module would have come from with the full ``sys.path`` and the
    table's folder (for the error message); found without importing anything."""
    if "." in missing:
        return None  # its package was found and imported: the module itself is missing
    spec = importlib.machinery.PathFinder.find_spec(missing, full_path)
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin
