"""Context updates through declared reducers: the only way a machine's data changes.

A context is a plain dict that nobody mutates: every update builds a new one, so a step that
fails leaves the old context untouched and a snapshot is just a reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from goosectl.controller.engine.spec import RESERVED_FIELDS, FieldSpec

ReducerFn = Callable[[Any, Any], Any]


class ContextError(Exception):
    """An action tried to write a field it may not write."""


def _replace(_old: Any, new: Any) -> Any:
    return new


def _append(old: Any, new: Any) -> tuple[Any, ...]:
    return (*(old or ()), new)


def _sum(old: Any, new: Any) -> Any:
    return (old or 0) + new


def deep_merge(old: Any, new: Any) -> Any:
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    out = dict(old)
    for k, v in new.items():
        out[k] = deep_merge(out[k], v) if k in out else v
    return out


#: What a field starts as when the table gives no default, per reducer.
_EMPTY: dict[str, Any] = {"append": (), "sum": 0, "merge": {}}

REDUCERS: dict[str, ReducerFn] = {
    "replace": _replace,
    "append": _append,
    "sum": _sum,
    "merge": deep_merge,
}


def initial_context(
    fields: Mapping[str, FieldSpec], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    ctx = {name: spec.default for name, spec in fields.items()}
    for name, spec in fields.items():
        if ctx[name] is None and spec.reducer in _EMPTY:
            ctx[name] = _EMPTY[spec.reducer]
    for k, v in overrides.items():
        if k not in fields:
            raise ContextError(f"context field {k!r} is not declared in the table")
        ctx[k] = v
    return ctx


def apply_updates(
    ctx: dict[str, Any],
    updates: Mapping[str, Any],
    reducers: Mapping[str, ReducerFn],
    who: str,
    plain: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """A new context with `updates` folded in through each field's reducer; `who` names
    the writer in an error.

    `plain`: the fields whose reducer is `replace`. Updates that touch only those (most
    do: a stream's accepted frame writes nine of them) are one C-level merge, not a
    reducer call per field (on the trip path, 22 of its 276 Python calls)."""
    if updates.keys() <= plain:
        return {**ctx, **updates}
    new = dict(ctx)
    for k, v in updates.items():
        fn = reducers.get(k)
        if fn is None:
            if k in RESERVED_FIELDS:
                raise ContextError(f"{who} may not write reserved field {k!r}")
            raise ContextError(f"{who} wrote undeclared context field {k!r}")
        new[k] = fn(new.get(k), v)
    return new


def normalise_restored(ctx: dict[str, Any], fields: Mapping[str, FieldSpec]) -> dict[str, Any]:
    """JSON turns tuples into lists: give append fields their tuple back after a restore."""
    out = dict(ctx)
    for name, spec in fields.items():
        if spec.reducer == "append" and isinstance(out.get(name), list):
            out[name] = tuple(out[name])
    return out
