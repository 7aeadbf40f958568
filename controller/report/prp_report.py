"""PRP in what a person reads: each frame's trailer in `listen` (named as tshark names
the fields, ``prp.trailer.*``), the LRE's counters, node table and alarms.

A `Reporter` whose frame lines carry the trailer: the one the LRE stripped (``--prp
native``), or, with PRP off, one read from the frame's own bytes when every field checks
(a capture from a PRP network is shown as such without switching anything on).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from goosectl.controller.report.goose_report import Reporter
from goosectl.protocols.goose import Vlan
from goosectl.protocols.prp import Rct, parse_rct


def trailer_fields(rct: Rct, wrong_lan: bool = False) -> dict[str, Any]:
    """tshark's field names and values (LanId as the number tshark shows: 10 or 11)."""
    out: dict[str, Any] = {
        "prp.trailer.prp_sequence_nr": rct.seq,
        "prp.trailer.prp_lan": rct.lan,
        "prp.trailer.prp_size": rct.lsdu_size,
    }
    if wrong_lan:
        out["prp.wrong_lan"] = True
    return out


class PrpReporter(Reporter):
    """`Reporter` with the trailer on each frame line; ``last`` gives the trailer of the
    frame being reported and whether it came on the wrong LAN (`PrpLive.last_trailer`;
    None: read the trailer from the frame's own bytes)."""

    def __init__(self, *args: Any, last: Callable[[], Any] | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._last = last
        self._fields: dict[str, Any] | None = None

    def set_source(self, last: Callable[[], Any]) -> None:
        """Where the LRE's verdict on the frame being reported is read."""
        self._last = last

    def frame(
        self, number: int, ts_ns: int, buf: bytes, vlan: Vlan | None, effects: list[Any]
    ) -> None:
        if self._last is not None:
            got = self._last()
            self._fields = None if got is None else trailer_fields(*got)
        else:
            rct = parse_rct(buf)
            self._fields = None if rct is None else trailer_fields(rct)
        try:
            super().frame(number, ts_ns, buf, vlan, effects)
        finally:
            self._fields = None

    def _emit(self, obj: dict, text: Any, always: bool = False) -> None:
        fields = self._fields
        if fields is None or "frame" not in obj:
            super()._emit(obj, text, always)
            return
        obj.update(fields)
        lan = {10: "A", 11: "B"}.get(fields["prp.trailer.prp_lan"], "?")
        note = f" prp seq={fields['prp.trailer.prp_sequence_nr']} lan={lan}"
        if fields.get("prp.wrong_lan"):
            note += " WRONG-LAN"
        super()._emit(obj, lambda: text() + note, always)

    def prp(self, status: dict[str, Any]) -> None:
        """The LRE's closing report: counters, node table."""
        if self.as_json:
            self.out.write(json.dumps({"event": "prp", **status}) + "\n")
            return
        c = status["counters"]
        self.out.write("\nprp (native LRE):\n")
        for port in "AB":
            row = " ".join(
                f"{k[6:-1]}={c[k]}" for k in c if k.endswith(port) and k.startswith("lreCnt")
            )
            self.out.write(f"  LAN {port}: {row}\n")
        self.out.write(f"  nodes: {c['lreCntNodes']}\n")
        for n in status["nodes"]:
            self.out.write(f"    {n['mac']} {n['type']}\n")

    def alarm(self, obj: dict[str, Any]) -> None:
        if self.as_json:
            self.out.write(json.dumps(obj) + "\n")
        else:
            self.out.write(f"!! prp {obj['kind']}: {obj['text']}\n")
