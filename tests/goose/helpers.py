"""Build publishers and subscribers on the virtual clock for GOOSE machine tests."""

from __future__ import annotations

from typing import Any

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.effects import FrameClassified, SendFrame, StreamState
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.goose import Boolean, FrameTemplate, GooseFrame, UtcTime

MS = 1_000_000
GOCB = "IED1LD0/LLN0$GO$trip"
DST = "01:0c:cd:01:00:10"
UTC0 = 1_750_000_000 * 1_000_000_000


def pub_cfg(**kw: Any) -> dict:
    base = {
        "gocb_ref": GOCB,
        "dat_set": "IED1LD0/LLN0$trips",
        "appid": 0x1010,
        "dst": DST,
        "members": ["boolean", "boolean"],
        "initial": [{"type": "boolean", "value": False}, {"type": "boolean", "value": False}],
    }
    base.update(kw)
    return base


def publisher(**kw: Any) -> GooseHub:
    return GooseHub(GooseConfig.model_validate({"publishers": [pub_cfg(**kw)]}))


def subscriber(**sub: Any) -> GooseHub:
    if not sub:
        return GooseHub()
    base = {"gocb_ref": GOCB, "appid": 0x1010, "dst": DST}
    base.update(sub)
    return GooseHub(GooseConfig.model_validate({"subscriptions": [base]}))


def frames(effects: list) -> list[SendFrame]:
    return [e for e in effects if type(e) is SendFrame]


def verdicts(effects: list) -> list[FrameClassified]:
    return [e for e in effects if type(e) is FrameClassified]


def states(effects: list) -> list[tuple[str, str]]:
    return [(e.side, e.state) for e in effects if type(e) is StreamState]


def bools(*v: bool) -> tuple:
    return tuple(Boolean(x) for x in v)


class Wire:
    """A publisher hub wired to a subscriber hub on one virtual clock."""

    def __init__(self, pub: GooseHub, sub: GooseHub, t0: int = 0) -> None:
        self.pub, self.sub, self.now = pub, sub, t0
        self.log: list[Any] = []
        self.deliver(pub.start(t0, UTC0 + t0))

    def deliver(self, effects: list, side: str = "A") -> None:
        for f in frames(effects):
            self.log += self.sub.frame(f.data, side, self.now)

    def run_until(self, t: int) -> None:
        while True:
            d = min(
                x for x in (self.pub.next_deadline(), self.sub.next_deadline(), t) if x is not None
            )
            if d >= t:
                break
            self.now = d
            self.log += self.sub.advance(d)
            self.deliver(self.pub.advance(d))
        self.now = t
        self.log += self.sub.advance(t)

    def publish(self, *values: bool) -> None:
        self.deliver(self.pub.publish(GOCB, bools(*values), self.now, UTC0 + self.now))


def raw_frame(
    st: int,
    sq: int,
    *,
    tal: int = 2000,
    t_s: int = 1_750_000_000,
    conf_rev: int = 1,
    values: tuple = (False, False),
    simulation: bool = False,
    s_bit: bool | None = None,
    nds_com: bool = False,
    gocb: str = GOCB,
    quality: int = 0x0A,
) -> bytes:
    """A hand-made frame, for sequences a well-behaved publisher never sends (`quality`:
    of `t`, a synchronised clock unless told)."""
    s_bit = simulation if s_bit is None else s_bit
    tpl = FrameTemplate(
        GooseFrame(
            gocb_ref=gocb,
            dat_set="IED1LD0/LLN0$trips",
            conf_rev=conf_rev,
            simulation=simulation,
            nds_com=nds_com,
            num_dat_set_entries=len(values),
            appid=0x1010,
            dst=bytes.fromhex(DST.replace(":", "")),
            reserved1=0x8000 if s_bit else 0,
        )
    )
    return tpl.build(st, sq, tal, UtcTime(t_s, 0, quality), tpl.encode_values(bools(*values)))
