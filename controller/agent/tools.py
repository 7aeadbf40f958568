"""The agent's tools, declared: each one's name, the outcomes it reports, its arguments.

A procedure step names a tool and gives it arguments; the step's `routes` must name exactly
the outcomes the tool can report. Both are checked when a procedure file is loaded, against
this registry, so a step that lacks an argument (a `wait_device` without `position`) or
misspells one is rejected with its file, line, step and field instead of failing with a
KeyError in the middle of a running session.

A tool is declared once, here, as its argument model with `@TOOLS.tool(outcomes=...)`; its
docstring is the tool's documentation. The declaration is pure data (this package does no
I/O); the code that runs a tool lives in the shell and is registered against the same model
(`controller/agent/tool_runs.py`, `@RUNS.runs(Model)`), and the tool runner refuses to
start when a declared tool has no implementation. Nothing else names the tools: no list, no
literal, no if/elif chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from goosectl.controller.link.registry import COMMANDS


class ToolArgs(BaseModel):
    """A tool's arguments, as a step's `args:` gives them (unknown keys are an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    #: the tool's name in procedure files, set by `ToolSet.tool`
    tool_name: ClassVar[str] = ""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    outcomes: tuple[str, ...]
    args: type[ToolArgs]
    doc: str


@dataclass
class ToolSet:
    """A namespace of tools a procedure may name (like the engine's `Registry`)."""

    name: str
    specs: dict[str, ToolSpec] = field(default_factory=dict)

    def tool(
        self, *, outcomes: tuple[str, ...] = ("ok",), name: str | None = None
    ) -> Callable[[type[ToolArgs]], type[ToolArgs]]:
        """Declare the tool whose arguments the decorated model describes; its name is
        `name` or the model's name in snake_case (`WaitDevice` -> `wait_device`)."""

        def declare(model: type[ToolArgs]) -> type[ToolArgs]:
            tool = name or _snake(model.__name__)
            if tool in self.specs:
                raise ValueError(f"tool {tool!r} is declared twice in {self.name}")
            if not outcomes:
                raise ValueError(f"tool {tool!r} must declare at least one outcome")
            model.tool_name = tool
            doc = " ".join((model.__doc__ or "").split())
            self.specs[tool] = ToolSpec(tool, tuple(outcomes), model, doc)
            return model

        return declare

    def merged(self, *others: ToolSet) -> ToolSet:
        """A new set with the tools of `others` added (later ones override earlier)."""
        out = ToolSet(self.name, dict(self.specs))
        for other in others:
            out.specs.update(other.specs)
        return out

    def __contains__(self, tool: object) -> bool:
        return tool in self.specs

    def __iter__(self) -> Iterator[str]:
        return iter(self.specs)

    def __getitem__(self, tool: str) -> ToolSpec:
        return self.specs[tool]

    def parse(self, tool: str, args: Any) -> ToolArgs:
        """A step's arguments as the tool's model (KeyError for an unknown tool,
        pydantic's ValidationError for bad arguments)."""
        return self.specs[tool].args.model_validate(args or {})

    def problems(self, tool: str, args: Any) -> list[tuple[tuple[str | int, ...], str]]:
        """Every problem with `args` for `tool`: (path inside args, reason); [] if fine."""
        try:
            self.parse(tool, args)
        except ValidationError as exc:
            return [(tuple(e["loc"]), _reason(e)) for e in exc.errors()]
        return []


def _reason(err: Any) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    if isinstance(err.get("input"), bool) and err["type"] != "bool_type":
        # YAML 1.1 reads unquoted on/off/yes/no as booleans: `position: on` is True
        msg += " (a YAML on/off/yes/no without quotes is a boolean: quote it)"
    return msg


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


# ------------------------------------------------------------------------------ the tools

TOOLS = ToolSet("agent")

#: a breaker position as the device reports it (the serial link's Dbpos, lower case)
Position = Literal["on", "off", "intermediate", "bad"]


@TOOLS.tool()
class Note(ToolArgs):
    """Log a line for the operator; a final step's text is the session's answer."""

    text: str = ""


@TOOLS.tool(outcomes=("ok", "blocked"))
class Check(ToolArgs):
    """Evaluate a condition on the bay now: `ok`, or `blocked` with the reasons."""

    condition: Literal["close_permitted", "device_ready"]


@TOOLS.tool()
class Device(ToolArgs):
    """Send a command to the device (`command` and that command's own fields, e.g.
    `set_output` takes `mask` and `values`); done when the device confirms it (for trip
    and close, when the breaker reaches the end position)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    command: str

    @model_validator(mode="after")
    def _command_fields(self) -> Device:
        if self.command not in COMMANDS:
            raise ValueError(f"unknown command {self.command!r}; known: {', '.join(COMMANDS)}")
        names = COMMANDS[self.command][1]
        given = self.fields()
        missing = [n for n in names if n not in given]
        unexpected = sorted(set(given) - set(names))
        if missing or unexpected:
            takes = ", ".join(names) or "no fields"
            why = "; ".join(
                x
                for x in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unexpected {', '.join(unexpected)}" if unexpected else "",
                )
                if x
            )
            raise ValueError(f"{self.command} takes {takes}: {why}")
        bad = [n for n, v in given.items() if type(v) is not int]
        if bad:
            raise ValueError(f"{self.command}: {', '.join(bad)} must be integers")
        return self

    def fields(self) -> dict[str, Any]:
        """The command's own fields (everything but `command`)."""
        return dict(self.model_extra or {})


@TOOLS.tool()
class WaitDevice(ToolArgs):
    """Wait until the device reports the breaker in `position` (bounded by the step's
    timeout)."""

    position: Position


@TOOLS.tool()
class WaitGoose(ToolArgs):
    """Wait until a subscribed GOOSE stream delivers `value` in data-set member `member`."""

    stream: str
    member: int = Field(default=0, ge=0)
    value: bool | int | float | str = True


@TOOLS.tool()
class Publish(ToolArgs):
    """Publish a topic's data sets now."""

    topic: str


@TOOLS.tool()
class Delay(ToolArgs):
    """Wait `ms` milliseconds (e.g. past the device's anti-pump window)."""

    ms: float = Field(ge=0)
