"""A bay controller's configuration, the top-level model: GOOSE, the device, the logic,
the control socket, the agent, and the maps between GOOSE and the bay.

Inputs map subscribed data-set members (by stream and member index or name, with an
optional path into structures) to bay events, name the member holding their quality, and
declare their fail-safe value; publications map bay topics to configured GOOSE publishers
and say where each published member's value comes from. The controller's behaviour mode
(IEC 61850-7-4 Mod/Beh) and simulation mode (LPHD.Sim) start as `logic.mode` and
`logic.simulation` say.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from goosectl.controller.config.agent import AgentCfg
from goosectl.controller.config.base import Cfg
from goosectl.controller.config.control import ControlCfg
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.link import DeviceLimits
from goosectl.controller.config.uplink import UplinkCfg
from goosectl.controller.engine.resources import shipped

#: The logic's tables (a config's `logic.table` defaults to the bay table there).
TABLES = shipped("goosectl.controller.logic", "tables")
#: The bay the demo, `goosectl bench` and the examples use (examples/controller/bay1.yaml).
DEFAULT_CONFIG = shipped("goosectl.controller.config", "defaults", "bay1.yaml")

#: Where a published member's value comes from (see `controller/logic/mapping.py`).
MemberSource = Literal["position", "quality", "t", "now", "trip", "bf_trip", "true", "false"]


#: The controller's behaviour modes (IEC 61850-7-4 Beh), as written in configs and commands.
MODES = ("on", "test", "test-blocked", "off")
Mode = Literal["on", "test", "test-blocked", "off"]
#: What an interlock input's value is while it is not valid: nothing that could permit.
UNKNOWN = "unknown"


def _mode(v: Any) -> Any:
    """YAML 1.1 reads a bare `on`/`off` as a boolean; `test/blocked` is the 7-4 spelling."""
    if v is True:
        return "on"
    if v is False:
        return "off"
    if isinstance(v, str):
        return v.strip().lower().replace("/", "-").replace("_", "-")
    return v


#: an interlock input permits on true unless the config says which values permit
_PERMIT_TRUE: list[bool | str | int] = [True]


class InputMap(Cfg):
    """One subscribed member -> one bay event, with its quality and its fail-safe value."""

    name: str | None = Field(
        default=None, description="how reports call it (default: the stream, or stream.member)"
    )
    stream: str = Field(description="subscription name, or its gocb_ref")
    member: int | str = Field(description="index in the data set, or a name in member_names")
    path: list[int] = Field(default_factory=list, description="indexes into structures")
    quality: int | str | None = Field(
        default=None, description="the member holding this input's quality (e.g. Tr.q)"
    )
    quality_path: list[int] = Field(default_factory=list)
    accept_questionable: bool = Field(
        default=False, description="act on a value whose quality is questionable"
    )
    failsafe: bool | str | int | None = Field(
        default=None,
        description="the value used before the first valid one, after the stream is lost, "
        "and while the receive rules refuse the data (default: false; an interlock: unknown)",
    )
    event: Literal["protection_trip", "close_request", "interlock"]
    when: Literal["rising", "falling", "change"] = "rising"
    interlock: str | None = None
    permit_when: list[bool | str | int] = Field(default_factory=lambda: _PERMIT_TRUE.copy())

    @model_validator(mode="after")
    def _interlock_named(self) -> InputMap:
        if (self.event == "interlock") != (self.interlock is not None):
            raise ValueError("an interlock input needs `interlock: NAME` (and only it does)")
        if self.event == "interlock" and self.failsafe_value in self.permit_when:
            raise ValueError(
                f"failsafe {self.failsafe_value!r} is in permit_when: lost or refused data "
                "would permit a close"
            )
        return self

    @property
    def failsafe_value(self) -> bool | str | int:
        if self.failsafe is not None:
            return self.failsafe
        return UNKNOWN if self.event == "interlock" else False


class PublicationMap(Cfg):
    topic: Literal["position", "trip_ack", "bf_trip", "alarm"]
    gocb_ref: str
    members: list[MemberSource]


class DeviceCfg(DeviceLimits):
    """The device: its port, the link's limits (`DeviceLimits`), the simulator's mechanism."""

    port: str = Field(default="sim", description="tty path, socket://host:port, or sim")
    baudrate: int = 115200
    # the simulator's mechanism, when port is `sim` (the demo and replay --device sim)
    open_ms: int = Field(default=30, gt=0)
    close_ms: int = Field(default=60, gt=0)
    spring_ms: int = Field(default=5000, gt=0)


class LogicCfg(Cfg):
    table: Path = TABLES / "bay.yaml"
    breaker_failure_ms: float = Field(default=150, gt=0)
    close_timeout_ms: float = Field(default=500, gt=0)
    mode: Mode = Field(
        default="on", description="behaviour mode at start: on, test, test-blocked, off"
    )
    simulation: bool = Field(
        default=False, description="simulation mode (LPHD.Sim) at start: take simulated GOOSE"
    )

    _mode = field_validator("mode", mode="before")(_mode)


class ControllerConfig(Cfg):
    goose: GooseConfig = Field(default_factory=GooseConfig)
    device: DeviceCfg = Field(default_factory=DeviceCfg)
    logic: LogicCfg = Field(default_factory=LogicCfg)
    inputs: list[InputMap] = Field(default_factory=list)
    publications: list[PublicationMap] = Field(default_factory=list)
    member_names: dict[str, list[str]] = Field(
        default_factory=dict, description="stream -> names of its data-set members"
    )
    journal: Path | None = None
    #: the control socket's place, its peers and its limits (`goosectl run`)
    control: ControlCfg = Field(default_factory=ControlCfg)
    #: the agent's sessions: confirmation expiry, how many may be open
    agent: AgentCfg = Field(default_factory=AgentCfg)
    #: where `goosectl uplink` sends this bay (a process of its own, not the controller's)
    uplink: UplinkCfg = Field(default_factory=UplinkCfg)

    @model_validator(mode="after")
    def _references(self) -> ControllerConfig:
        streams = {s.label for s in self.goose.subscriptions} | {
            s.gocb_ref for s in self.goose.subscriptions
        }
        pubs = {p.gocb_ref: p for p in self.goose.publishers}
        for i, inp in enumerate(self.inputs):
            if inp.stream not in streams:
                raise ValueError(
                    f"inputs[{i}].stream: {inp.stream!r} is not a subscription "
                    f"(known: {', '.join(sorted(streams)) or 'none'})"
                )
            for field in ("member", "quality"):
                ref = getattr(inp, field)
                if isinstance(ref, str) and ref not in self.member_names.get(inp.stream, []):
                    raise ValueError(
                        f"inputs[{i}].{field}: {ref!r} is not in member_names[{inp.stream!r}]"
                    )
        names = [self.input_name(i) for i in range(len(self.inputs))]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise ValueError(f"inputs[{i}].name: {name!r} names another input too")
        for i, pub in enumerate(self.publications):
            cfg = pubs.get(pub.gocb_ref)
            if cfg is None:
                raise ValueError(
                    f"publications[{i}].gocb_ref: {pub.gocb_ref!r} is not a configured publisher"
                )
            if cfg.members and len(cfg.members) != len(pub.members):
                raise ValueError(
                    f"publications[{i}].members: {len(pub.members)} sources for "
                    f"a data set of {len(cfg.members)} members"
                )
        return self

    def member_index(self, inp: InputMap, ref: int | str | None = None) -> int:
        """The data-set index of the input's member (or of `ref`, e.g. its quality)."""
        ref = inp.member if ref is None else ref
        if isinstance(ref, int):
            return ref
        return self.member_names[inp.stream].index(ref)

    def input_name(self, i: int) -> str:
        """The input's name: given, else its stream, else stream.member if the stream
        feeds several inputs."""
        inp = self.inputs[i]
        if inp.name:
            return inp.name
        if sum(1 for x in self.inputs if x.stream == inp.stream) == 1:
            return inp.stream
        return f"{inp.stream}.{inp.member}"
