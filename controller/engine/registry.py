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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

Kind = Literal["guard", "action", "router"]


class Event(NamedTuple):
    """What guards and actions see: the event name, its payload, and the dispatch time."""

    name: str
    payload: Any
    time_ns: int


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

    def _add(self, kind: Kind, name: str | None, fn: Callable, **kw: Any) -> Callable:
        self.entries[name or fn.__name__.rstrip("_")] = Entry(kind, fn, **kw)
        return fn

    def guard(self, fn: Callable | None = None, *, name: str | None = None, factory=False):
        if fn is None:
            return lambda f: self._add("guard", name, f, factory=factory)
        return self._add("guard", name, fn, factory=factory)

    def action(self, fn: Callable | None = None, *, name: str | None = None, factory=False):
        if fn is None:
            return lambda f: self._add("action", name, f, factory=factory)
        return self._add("action", name, fn, factory=factory)

    def router(self, *, outcomes: Iterable[str], name: str | None = None, factory=False):
        return lambda f: self._add("router", name, f, factory=factory, outcomes=tuple(outcomes))

    def merged(self, *others: Registry) -> Registry:
        out = Registry(self.name, dict(self.entries))
        for other in others:
            out.entries.update(other.entries)
        return out


def load_registry_module(path: str) -> Registry:
    """Import ``path`` and return its ``REGISTRY``; errors say which module and why."""
    try:
        module = importlib.import_module(path)
    except ImportError as exc:
        raise LookupError(f"registry module {path!r} cannot be imported: {exc}") from exc
    reg = getattr(module, "REGISTRY", None)
    if not isinstance(reg, Registry):
        raise LookupError(f"registry module {path!r} has no REGISTRY (a Registry instance)")
    return reg
