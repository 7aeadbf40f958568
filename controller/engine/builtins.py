"""Generic guards and actions every table may use without writing Python.

They are factories: the table gives the field names and values, bound once at compile time.
"""

from __future__ import annotations

from typing import Any

from goosectl.controller.engine.effects import Notify, Raise
from goosectl.controller.engine.registry import Action, Ctx, Event, Guard, Registry

REGISTRY = Registry("builtins")

_MISSING = object()


def _payload_get(ev: Event, key: str) -> Any:
    payload = ev.payload
    if isinstance(payload, dict):
        return payload.get(key, _MISSING)
    return getattr(payload, key, _MISSING)


@REGISTRY.action(name="set", factory=True)
def set_(**values: Any) -> Action:
    """Set context fields to constants (through their reducers)."""
    frozen = dict(values)
    return lambda ctx, ev: frozen


@REGISTRY.action(factory=True)
def incr(field: str, by: int = 1) -> Action:
    """Add `by` to a field. Declare the field with the `sum` reducer for this to accumulate."""
    update = {field: by}
    return lambda ctx, ev: update


@REGISTRY.action(factory=True)
def store(field: str, key: str | None = None) -> Action:
    """Copy the payload (or one key of it) into a context field."""
    if key is None:
        return lambda ctx, ev: {field: ev.payload}

    def action(ctx: Ctx, ev: Event) -> dict[str, Any] | None:
        value = _payload_get(ev, key)
        return None if value is _MISSING else {field: value}

    return action


@REGISTRY.action(factory=True)
def notify(topic: str, field: str | None = None) -> Action:
    """Emit a Notify effect, optionally carrying a context field's value."""
    if field is None:
        effect = Notify(topic)
        return lambda ctx, ev: effect
    return lambda ctx, ev: Notify(topic, ctx.get(field))


@REGISTRY.action(name="raise", factory=True)
def raise_(event: str) -> Action:
    """Queue another event on this machine (run to completion before dispatch returns)."""
    effect = Raise(event)
    return lambda ctx, ev: effect


@REGISTRY.guard(factory=True)
def field_eq(field: str, value: Any) -> Guard:
    return lambda ctx, ev: ctx.get(field) == value


@REGISTRY.guard(factory=True)
def field_lt(field: str, value: Any) -> Guard:
    return lambda ctx, ev: ctx.get(field, 0) < value


@REGISTRY.guard(factory=True)
def field_ge(field: str, value: Any) -> Guard:
    return lambda ctx, ev: ctx.get(field, 0) >= value


@REGISTRY.guard(factory=True)
def payload_eq(key: str, value: Any) -> Guard:
    return lambda ctx, ev: _payload_get(ev, key) == value


@REGISTRY.guard(factory=True)
def payload_true(key: str) -> Guard:
    return lambda ctx, ev: bool(_payload_get(ev, key) not in (_MISSING, None, False, 0))
