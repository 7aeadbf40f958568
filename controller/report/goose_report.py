"""Turn the hub's reports into what `listen` and `replay` print: JSON lines or a table.

Frames carry the `goosectl decode --json` keys plus `class`, `flags`, `stream_state` and,
when the receive rules stopped its values, `refused` (the rule); stream changes are
``{"event": "stream", "gocbRef", "appid", "side", "state"}``; a subscription's LGOS view,
whenever it changes, is ``{"event": "lgos", "stream", "gocbRef", "appid", "St", "SimSt",
"LastStNum", "ConfRevNum", "RxConfRevNum", "ErrSt", "NdsCom", "src", "refused"}``; an alarm
of the receive rules (two sequences or sources on a stream, a learned source) is
``{"event": "alarm", "name", "active", "detail"}``, in the text ``!! alarm NAME raised: ...``.
Full decoding happens here, for printing, never on the controller's hot path.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TextIO

from goosectl.controller.display import printable
from goosectl.controller.engine.effects import Alarm, Notify
from goosectl.controller.goose.effects import FrameClassified, LgosView, PublisherSides, StreamState
from goosectl.controller.goose.gate import ERR_TEXT
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.replay.capture_clock import TimeJump
from goosectl.controller.report.anomalies import NO_STREAM, Anomalies, utc_text
from goosectl.protocols.goose import GooseError, Vlan, decode_frame, frame_to_json

log = logging.getLogger(__package__)


class Reporter:
    def __init__(
        self,
        hub: GooseHub,
        as_json: bool,
        out: TextIO = sys.stdout,
        appid: int | None = None,
        gocb_ref: str | None = None,
        clock: Callable[[], int] | None = None,
        quiet: bool = False,
    ) -> None:
        self.hub = hub
        #: frames and events counted and judged, not printed (`replay -q`: the report only)
        self.quiet = quiet
        self.as_json = as_json
        self.out = out
        self.appid = appid
        self.gocb_ref = gocb_ref
        self.t0: float | None = None
        #: capture clock jumps reported (replay)
        self.time_jumps = 0
        #: frames printed, and the APPIDs seen, so a filter that matched nothing says so
        self.shown = 0
        self.appids_seen: set[int] = set()
        #: the time of an event no frame brought (a TAL that ran out): the replay's virtual
        #: clock or the host's, read by the shell that made this reporter; without it, the
        #: last frame's time
        self.clock = clock
        #: the last frame read (its number and time): every event line names both
        self.frame_no: int | None = None
        self.frame_ns: int | None = None
        self.anomalies = Anomalies()

    def _stream_state(self, stream_id: str) -> str | None:
        m = self.hub.scheduler.machines.get(stream_id)
        return m.state if m is not None else None

    def _wanted(self, appid: int | None, gocb_ref: str | None) -> bool:
        return (self.appid is None or appid == self.appid) and (
            self.gocb_ref is None or gocb_ref == self.gocb_ref
        )

    def frame(
        self, number: int, ts_ns: int, buf: bytes, vlan: Vlan | None, effects: list[Any]
    ) -> None:
        verdict = next((e for e in effects if type(e) is FrameClassified), None)
        self.frame_no, self.frame_ns = number, ts_ns
        time_s = ts_ns / 1e9
        try:
            obj = frame_to_json(decode_frame(buf, vlan=vlan), number=number, time=time_s)
        except GooseError as exc:
            obj = {
                "frame": number,
                "time": time_s,
                "error": str(exc),
                "offset": exc.offset,
                "field": exc.path,
            }
            if verdict is None:
                self.anomalies.add(NO_STREAM, "malformed", number, ts_ns)
        if obj.get("appid") is not None:
            self.appids_seen.add(obj["appid"])
        if not self._wanted(obj.get("appid"), obj.get("gocbRef")):
            return
        self.shown += 1
        if verdict is not None:
            obj["class"] = verdict.cls
            obj["flags"] = list(verdict.flags)
            obj["stream_state"] = self._stream_state(verdict.stream)
            if verdict.side in ("A", "B"):
                obj["side"] = verdict.side
            if verdict.refused is not None:
                obj["refused"] = verdict.refused
            self.anomalies.frame(verdict, number, ts_ns)
        auth = self.hub.bank.auth
        if auth is not None and auth.last is not None:  # IEC 62351-6: this frame's verdict
            obj["auth"] = auth.last.as_json()
        self._emit(obj, lambda: self._frame_text(obj, time_s))
        self.effects(effects, ts_ns)

    def _now(self) -> int:
        if self.clock is not None:
            return self.clock()
        return self.frame_ns or 0

    def _stamp(self, obj: dict[str, Any], now_ns: int) -> dict[str, Any]:
        """An event's time (UTC) and the number of the frame it came with, or, for an event
        of a timer, the last frame read before it."""
        obj["utc"] = utc_text(now_ns)
        obj["frame_no"] = self.frame_no
        return obj

    def _prefix(self, obj: dict[str, Any]) -> str:
        no = "-" if obj["frame_no"] is None else obj["frame_no"]
        return f"-- {obj['utc']} #{no} "

    def effects(self, effects: list[Any], now_ns: int | None = None) -> None:
        """Print the events among `effects`; `now_ns` is when they happened (None: the
        reporter's clock, for effects of timers)."""
        if now_ns is None and any(type(e) in _EVENTS for e in effects):
            now_ns = self._now()
        for e in effects:
            event = _EVENT_LINES.get(type(e))
            if event is not None:
                assert now_ns is not None  # set above for every event
                event(self, e, now_ns)

    def _stream_event(self, e: StreamState, now_ns: int) -> None:
        stream = self.hub.bank.by_id.get(e.stream)
        gocb, appid = (stream.gocb_ref, stream.appid) if stream else (None, None)
        if not self._wanted(appid, gocb):
            return
        obj: dict[str, Any] = {
            "event": "stream",
            "gocbRef": gocb,
            "appid": appid,
            "side": e.side,
            "state": e.state,
        }
        self._stamp(obj, now_ns)
        if e.state == "lost":
            self.anomalies.add(e.stream, "lost", self.frame_no, now_ns)
        self._emit(
            obj,
            lambda o=obj: (
                f"{self._prefix(o)}stream {o['gocbRef']} appid "
                f"0x{o['appid']:04x} side {o['side']}: {o['state']}"
            ),
        )

    def _lgos_event(self, e: LgosView, now_ns: int) -> None:
        if not self._wanted(e.appid, e.gocb_ref):
            return
        obj = self._stamp({"event": "lgos", **e.as_json()}, now_ns)
        self._emit(obj, lambda v=e, o=obj: lgos_text(v, self._prefix(o)))

    def _alarm_event(self, e: Alarm, now_ns: int) -> None:
        obj = self._stamp(
            {"event": "alarm", "name": e.name, "active": e.active, "detail": e.detail},
            now_ns,
        )
        self._emit(
            obj,
            lambda o=obj: (
                f"!! {o['utc']} #{o['frame_no']} alarm {o['name']} "
                f"{'raised' if o['active'] else 'cleared'}"
                + (f": {o['detail']}" if o["detail"] else "")
            ),
        )

    def _error_event(self, e: Notify, now_ns: int) -> None:
        if e.topic != "error":
            return
        obj = self._stamp({"event": "error", "detail": e.data}, now_ns)
        self._emit(obj, lambda o=obj: f"!! {o['utc']} #{o['frame_no']} {o['detail']}")

    def _publisher_event(self, e: PublisherSides, now_ns: int) -> None:
        obj = {
            "event": "publisher",
            "gocbRef": e.gocb_ref,
            "active": list(e.active),
            "reason": e.reason,
        }
        self._stamp(obj, now_ns)
        self._emit(
            obj,
            lambda o=obj: (
                f"{self._prefix(o)}publisher {o['gocbRef']}: active "
                f"{','.join(o['active'])} ({o['reason']})"
            ),
        )

    def _frame_text(self, obj: dict, time_s: float) -> str:
        if self.t0 is None:
            self.t0 = time_s
        if "error" in obj:
            return f"{obj['frame']:>6} {time_s - self.t0:10.6f}  malformed: {obj['error']}"
        flags = ",".join(obj.get("flags", [])) or "-"
        if "refused" in obj:
            flags += f" REFUSED:{obj['refused']}"
        return (
            f"{obj['frame']:>6} {time_s - self.t0:10.6f}  0x{obj['appid']:04x} "
            f"{obj['gocbRef']:<40} st={obj['stNum']:<8} sq={obj['sqNum']:<8} "
            f"tal={obj['timeAllowedtoLive']:<6} {obj.get('class', '?'):<15} "
            f"{obj.get('stream_state') or '-':<15} {flags}"
        )

    def _emit(self, obj: dict, text, always: bool = False) -> None:
        if self.quiet and not always:
            return
        if self.as_json:
            self.out.write(json.dumps(obj) + "\n")
        else:  # a frame's strings may hold line feeds or ESC: one event, one line
            self.out.write(printable(text()) + "\n")

    def time_jump(self, jump: TimeJump) -> None:
        """A jump of the capture's clock (replay): one event, the gap not replayed."""
        self.time_jumps += 1
        obj = {
            "event": "time_jump",
            "frame": jump.frame,
            "kind": jump.kind,
            "step_s": None if jump.step_ns is None else jump.step_ns / 1e9,
            "capture_ns": jump.capture_ns,
            "replay_ns": jump.replay_ns,
        }
        self._emit(obj, lambda: f"!! time jump: {jump.text()}", always=True)

    def filter_note(self) -> str | None:
        """What to say when --appid/--gocbref matched no frame (rather than print nothing)."""
        if self.shown or not self.appids_seen or (self.appid is None and self.gocb_ref is None):
            return None
        wanted = []
        if self.appid is not None:
            wanted.append(f"--appid 0x{self.appid:04x}")
        if self.gocb_ref is not None:
            wanted.append(f"--gocbref {self.gocb_ref}")
        seen = ", ".join(f"0x{a:04x}" for a in sorted(self.appids_seen)) or "none"
        return f"no frame matched {' and '.join(wanted)} (APPIDs seen: {seen})"

    def summary(self) -> None:
        note = self.filter_note()
        if note is not None:  # a diagnostic: stderr, through logging (-qq hides it)
            log.warning("%s", note)
        counters = self.hub.counters()
        if self.time_jumps:
            counters = {**counters, "time_jumps": self.time_jumps}
        if self.as_json:
            self.out.write(json.dumps(self.anomalies.as_json()) + "\n")
            self.out.write(json.dumps({"event": "counters", **counters}) + "\n")
            return
        self.out.write("\n" + "\n".join(printable(x) for x in self.anomalies.lines()) + "\n")
        self.out.write("\nstreams:\n")
        for sid, s in counters["streams"].items():
            counts = " ".join(f"{k}={v}" for k, v in s["counts"].items())
            sides = " ".join(f"{k}:{v}" for k, v in s["sides"].items())
            self.out.write(f"  {sid}: {s['state']} {sides}\n    {counts}\n")
            lg = s["lgos"]
            self.out.write(
                f"    LGOS St={lg['St']} SimSt={lg['SimSt']} LastStNum={lg['LastStNum']} "
                f"ConfRevNum={lg['ConfRevNum']} RxConfRevNum={lg['RxConfRevNum']} "
                f"NdsCom={lg['NdsCom']} ErrSt={lg['ErrSt']} src={lg['src']}"
                + "".join(f" refused.{k}={n}" for k, n in lg["refused"].items())
                + "\n"
            )
        jumps = f" time_jumps={self.time_jumps}" if self.time_jumps else ""
        self.out.write(
            f"unmatched={counters['unmatched']} malformed={counters['malformed']}{jumps}\n"
        )


#: the effects printed as event lines (each with its time and frame number)
_EVENTS = frozenset({StreamState, LgosView, Notify, PublisherSides, Alarm})
#: an event's type -> the method that reports it (a Notify only when it is an error)
_EVENT_LINES: dict[type, Callable[[Reporter, Any, int], None]] = {
    StreamState: Reporter._stream_event,
    LgosView: Reporter._lgos_event,
    Alarm: Reporter._alarm_event,
    Notify: Reporter._error_event,
    PublisherSides: Reporter._publisher_event,
}


def lgos_text(v: LgosView, prefix: str = "-- ") -> str:
    why = "" if v.st else f" ({ERR_TEXT.get(v.err, v.err)})"
    return (
        f"{prefix}lgos {v.label} 0x{v.appid:04x}: St={v.st} SimSt={v.sim_st} "
        f"LastStNum={v.last_st_num} ConfRevNum={v.conf_rev} RxConfRevNum={v.rx_conf_rev} "
        f"NdsCom={v.nds_com} ErrSt={v.err}{why} src={v.src}"
    )
