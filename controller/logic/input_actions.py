"""Actions of the input table (tables/input.yaml): take a value, or fall back to fail-safe."""

from __future__ import annotations

from typing import Any

from goosectl.controller.engine.registry import Registry
from goosectl.controller.logic.effects import InputChanged

REGISTRY = Registry("bay-input")


def consequence(ctx, valid: bool, value: Any) -> str:
    """What the input's value means for the bay, in the words of the timeline."""
    kind = ctx["kind"]
    if kind == "interlock":
        return "close permitted" if valid and value in ctx["permit_when"] else "close blocked"
    what = "trip" if kind == "protection_trip" else "close request"
    if valid:
        return f"{what} {str(value).lower()}"
    return f"{what} {str(value).lower()} (fail-safe)"


@REGISTRY.action(factory=True)
def take(validity_changed: bool):
    """The input's value acts. Becoming valid is reported (`InputChanged`); a new value of
    a valid input is only stored: the bay controller, which fed it, takes the edge itself
    (the trip path: no effect to build and route)."""
    if not validity_changed:
        return lambda ctx, ev: {"value": ev.payload}

    def action(ctx, ev):
        value = ev.payload
        return [
            {"value": value, "reason": ""},
            InputChanged(
                ctx["input"],
                ctx["stream"],
                ctx["kind"],
                True,
                value,
                ctx["value"],
                "",
                consequence(ctx, True, value),
            ),
        ]

    return action


@REGISTRY.action
def fail_safe(ctx, ev):
    value = ctx["failsafe"]
    return [
        {"value": value, "reason": ev.payload},
        InputChanged(
            ctx["input"],
            ctx["stream"],
            ctx["kind"],
            False,
            value,
            ctx["value"],
            ev.payload,
            consequence(ctx, False, value),
        ),
    ]
