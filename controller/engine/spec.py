"""A machine declared as data: the pydantic models a table file is validated against.

Pydantic checks structure at the edge (when a table is loaded); the semantic checks that
need the whole table (reachability, exclusivity, router outcomes) live in `validate.py`,
and the hot path runs on the compiled form in `compiled.py`, never on these models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Reducer = Literal["replace", "append", "sum", "merge"]
UnhandledPolicy = Literal["reject", "ignore"]

#: Context fields the engine owns; actions that try to write them are refused.
RESERVED_FIELDS = frozenset({"state", "machine", "seq", "table", "version"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CallRef(_Strict):
    """A guard, action or router named in the table, with optional compile-time arguments."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value}
        return value

    def label(self) -> str:
        if not self.args:
            return self.name
        inner = ",".join(f"{k}={v}" for k, v in sorted(self.args.items()))
        return f"{self.name}({inner})"


class GuardRef(CallRef):
    """A guard; `not: true` (or a leading `!` in the short form) inverts it."""

    negate: bool = Field(default=False, alias="not")

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value.startswith("!"):
                return {"name": value[1:].strip(), "not": True}
            if value.startswith("not "):
                return {"name": value[4:].strip(), "not": True}
            return {"name": value}
        return value

    def label(self) -> str:
        base = super().label()
        return f"!{base}" if self.negate else base


class StateSpec(_Strict):
    name: str
    entry: list[CallRef] = Field(default_factory=list)
    exit: list[CallRef] = Field(default_factory=list)
    description: str = ""


class TransitionSpec(_Strict):
    """One row: in `source` on `event`, if `guard`, run `actions` and go to `target`.

    `source` may be a list or `*` (every non-final state). `internal: true` keeps a
    self-transition from running exit/entry actions and restarting the state's timers; an
    internal row may omit `target` (it stays where it is, handy with `*`).
    A row with `router` instead of `target` picks its target from `routes` by the outcome the
    router returns (the Workflow layer's conditional route).
    """

    source: str | list[str]
    event: str
    target: str | None = None
    guard: GuardRef | None = None
    actions: list[CallRef] = Field(default_factory=list)
    internal: bool = False
    router: CallRef | None = None
    routes: dict[str, str] | None = None

    @model_validator(mode="after")
    def _target_or_router(self) -> TransitionSpec:
        if self.router is None and self.target is None and not self.internal:
            raise ValueError("a transition needs a target (or internal: true, or a router)")
        if (self.router is None) != (self.routes is None):
            raise ValueError("router and routes go together")
        if self.router is not None and self.target is not None:
            raise ValueError("a routed transition takes its target from routes, not target")
        return self

    def sources(self) -> list[str]:
        return [self.source] if isinstance(self.source, str) else list(self.source)

    def target_from(self, source: str) -> str | None:
        """Where this row goes from `source` (None for a routed row)."""
        if self.target is None and self.router is None:
            return source
        return self.target


class TimerSpec(_Strict):
    """While in `state`, after `after_ms` (a number, or the name of a context field holding
    milliseconds) emit `event`. Leaving the state cancels it."""

    state: str
    after_ms: float | str
    event: str
    name: str | None = None

    def timer_name(self) -> str:
        return self.name or f"{self.state}:{self.event}"


class FieldSpec(_Strict):
    reducer: Reducer = "replace"
    default: Any = None


class RouterSpec(_Strict):
    """A router's declared outcomes; every route map using it must have exactly these keys."""

    outcomes: list[str]


class MachineSpec(_Strict):
    name: str
    version: str = "1"
    description: str = ""
    registry: list[str] = Field(default_factory=list)
    initial: str
    states: list[StateSpec]
    final: list[str] = Field(default_factory=list)
    events: list[str]
    transitions: list[TransitionSpec]
    timers: list[TimerSpec] = Field(default_factory=list)
    context: dict[str, FieldSpec] = Field(default_factory=dict)
    routers: dict[str, RouterSpec] = Field(default_factory=dict)
    on_unhandled: UnhandledPolicy = "reject"

    @field_validator("states", mode="before")
    @classmethod
    def _state_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("registry", mode="before")
    @classmethod
    def _registry_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("context", mode="before")
    @classmethod
    def _field_shorthand(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({"reducer": v} if isinstance(v, str) else v) for k, v in value.items()}
        return value

    def state_names(self) -> list[str]:
        return [s.name for s in self.states]
