"""The controller's configuration: GOOSE, the device, the logic, and the maps between them.

Inputs map subscribed data-set members (by stream and member index or name, with an
optional path into structures) to bay events; publications map bay topics to configured
GOOSE publishers and say where each published member's value comes from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from controller.goose.config import GooseConfig

TABLES = Path(__file__).parent / "tables"
#: The bay the demo, `goosectl bench` and the examples use (examples/controller/bay1.yaml).
DEFAULT_CONFIG = Path(__file__).parent / "defaults" / "bay1.yaml"

#: Where a published member's value comes from (see `controller/logic/mapping.py`).
MemberSource = Literal["position", "quality", "t", "now", "trip", "bf_trip", "true", "false"]


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputMap(_Cfg):
    """One subscribed member -> one bay event."""

    stream: str = Field(description="subscription name, or its gocb_ref")
    member: int | str = Field(description="index in the data set, or a name in member_names")
    path: list[int] = Field(default_factory=list, description="indexes into structures")
    event: Literal["protection_trip", "close_request", "interlock"]
    when: Literal["rising", "falling", "change"] = "rising"
    interlock: str | None = None
    permit_when: list[bool | str | int] = Field(default_factory=lambda: [True])

    @model_validator(mode="after")
    def _interlock_named(self) -> InputMap:
        if (self.event == "interlock") != (self.interlock is not None):
            raise ValueError("an interlock input needs `interlock: NAME` (and only it does)")
        return self


class PublicationMap(_Cfg):
    topic: Literal["position", "trip_ack", "bf_trip", "alarm"]
    gocb_ref: str
    members: list[MemberSource]


class DeviceCfg(_Cfg):
    port: str = Field(default="sim", description="tty path, socket://host:port, or sim")
    baudrate: int = 115200
    response_timeout_ms: float = Field(default=50, gt=0)
    max_retries: int = Field(default=3, ge=0)
    # the simulator's mechanism, when port is `sim` (the demo and replay --device sim)
    open_ms: int = Field(default=30, gt=0)
    close_ms: int = Field(default=60, gt=0)
    spring_ms: int = Field(default=5000, gt=0)


class LogicCfg(_Cfg):
    table: Path = TABLES / "bay.yaml"
    breaker_failure_ms: float = Field(default=150, gt=0)
    close_timeout_ms: float = Field(default=500, gt=0)


class ControllerConfig(_Cfg):
    goose: GooseConfig = Field(default_factory=GooseConfig)
    device: DeviceCfg = Field(default_factory=DeviceCfg)
    logic: LogicCfg = Field(default_factory=LogicCfg)
    inputs: list[InputMap] = Field(default_factory=list)
    publications: list[PublicationMap] = Field(default_factory=list)
    member_names: dict[str, list[str]] = Field(
        default_factory=dict, description="stream -> names of its data-set members"
    )
    journal: Path | None = None

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
            if isinstance(inp.member, str) and inp.member not in self.member_names.get(
                inp.stream, []
            ):
                raise ValueError(
                    f"inputs[{i}].member: {inp.member!r} is not in member_names[{inp.stream!r}]"
                )
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

    def member_index(self, inp: InputMap) -> int:
        if isinstance(inp.member, int):
            return inp.member
        return self.member_names[inp.stream].index(inp.member)
