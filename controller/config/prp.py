"""PRP (IEC 62439-3) as configuration: `goose.prp` is ``off``, ``native`` or ``kernel``,
or a table with the mode and the LRE's settings.

- ``off`` (the default): no trailer is added; a received frame with a valid trailer is
  still shown with it (`listen`), and the GOOSE-level A/B merge deduplicates.
- ``native``: goosectl is the node's LRE on the two interfaces (A and B): trailers on
  what it sends, duplicate discard, supervision frames, the node table, the counters.
- ``kernel``: the interface is the kernel's PRP device (``ip link add prp0 type hsr
  slave1 a slave2 b supervision 0 proto 1``), which does all of that; goosectl sends and
  receives plain frames on it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from goosectl.controller.config.base import Cfg

PrpMode = Literal["off", "native", "kernel"]


class PrpCfg(Cfg):
    mode: PrpMode = "off"
    duplicate: Literal["discard", "accept"] = Field(
        default="discard",
        description="discard: the first copy of each (source MAC, SeqNr) goes up, later "
        "copies are dropped; accept: both go up (the GOOSE-level merge sorts them)",
    )
    silent_ms: int = Field(
        default=3_000,
        ge=100,
        description="a DANP not heard on one LAN this long (and heard on the other) is alarmed",
    )
    supervision_address: int = Field(
        default=0, ge=0, le=255, description="XX of the supervision address 01:15:4E:00:01:XX"
    )
    supervision_vlan: int | None = Field(
        default=None, ge=0, le=4095, description="send supervision frames with this VLAN id"
    )

    @model_validator(mode="before")
    @classmethod
    def _mode_only(cls, v: Any) -> Any:
        """`prp: native` is `prp: {mode: native}`."""
        return {"mode": v} if isinstance(v, str) else v
