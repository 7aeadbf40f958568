"""One poller for every page: the controller's snapshot once a second, whatever the number
of browsers, so five open pages cost the controller what one costs (one `controller` and
one `list` request a second, each a `control` row in its journal).

From successive snapshots it derives what one snapshot cannot say: each stream's
retransmission interval (time between snapshots over the sqNum advance, within one stNum),
and the alarms with their ISA-18.2 state (active and unacknowledged while the condition
holds, returned to normal and unacknowledged after it clears: the controller has no
acknowledge request, so nothing here pretends to acknowledge).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from goosectl.controller.report.histogram import render_svg
from goosectl.controller.web.source import Controller, JournalReader

#: intervals kept per stream for its sparkline
SPARK = 60
#: the histogram is drawn again at most this often
HISTOGRAM_S = 5.0
#: alarms that returned to normal, kept for the list (the newest)
RETURNED_KEPT = 50


@dataclass
class Alarm:
    key: str
    text: str
    priority: str
    state: str  # "active" | "returned"
    since: str


def _utc(t: float | None = None) -> str:
    when = dt.datetime.fromtimestamp(time.time() if t is None else t, dt.UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The abnormal conditions a snapshot shows: key -> (text, priority)."""
    if not status.get("ok"):
        return {}
    out: dict[str, tuple[str, str]] = {}
    if status.get("link") != "up":
        out["device_link"] = (f"device link {status.get('link')}", "high")
    if status.get("breaker") == "breaker_failure":
        out["breaker_failure"] = ("breaker failure: the breaker did not open", "urgent")
    for name, on in sorted((status.get("device_alarms") or {}).items()):
        if on:
            out[f"device:{name}"] = (f"device alarm {name}", "high")
    if status.get("position") == "bad":
        out["position_bad"] = ("breaker position bad (both contacts or none)", "high")
    for s in status.get("streams", []):
        if s.get("simulated") and not status.get("simulation"):
            continue  # a test set's stream the controller does not take: not an alarm
        if s.get("state") in ("lost", "config_mismatch"):
            key = f"stream:{s.get('id')}"
            name = f"{s.get('stream')}{' (simulated)' if s.get('simulated') else ''}"
            out[key] = (f"stream {name}: {s.get('state')}", "high")
    for v in status.get("lgos", []):
        if not v.get("St") and v.get("ErrSt") not in (None, "", "no_data", "lost"):
            out[f"lgos:{v.get('stream')}"] = (
                f"subscription {v.get('stream')} refused: {v.get('ErrSt')}",
                "medium",
            )
    return out


class AlarmBook:
    """Alarms by condition, with their ISA-18.2 state; limits come from journal rows."""

    def __init__(self) -> None:
        self.active: dict[str, Alarm] = {}
        self.returned: deque[Alarm] = deque(maxlen=RETURNED_KEPT)

    def update(self, now: dict[str, tuple[str, str]], owner: str = "status") -> None:
        """`now`: the conditions that hold; those of `owner` that are gone return."""
        for key, (text, prio) in now.items():
            if key not in self.active:
                self.active[key] = Alarm(key, text, prio, "active", _utc())
            else:
                self.active[key].text = text
        for key in [k for k in self.active if k not in now and _owner(k) == owner]:
            a = self.active.pop(key)
            self.returned.appendleft(Alarm(a.key, a.text, a.priority, "returned", _utc()))

    def limit_row(self, row: dict[str, Any]) -> None:
        """A `limit:NAME` journal row: raised on ok -> exceeded, returned on -> ok."""
        key = row["machine"]
        if row["target"] == "exceeded" and key not in self.active:
            name = key.removeprefix("limit:")
            self.active[key] = Alarm(key, f"limit {name}: {row['detail']}", "medium", "active",
                                     row["utc"] or _utc())  # fmt: skip
        elif row["target"] == "ok" and key in self.active:
            a = self.active.pop(key)
            self.returned.appendleft(
                Alarm(a.key, a.text, a.priority, "returned", row["utc"] or _utc())
            )

    def rows(self) -> list[dict[str, str]]:
        order = {"urgent": 0, "high": 1, "medium": 2, "low": 3}
        active = sorted(self.active.values(), key=lambda a: (order[a.priority], a.since))
        return [a.__dict__.copy() for a in [*active, *self.returned]]


def _owner(key: str) -> str:
    return "limit" if key.startswith("limit:") else "status"


class Retransmissions:
    """Per stream: the mean interval between frames since the last snapshot, in ms."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[float, int | None, int | None]] = {}
        self.spark: dict[str, deque[float]] = {}

    def update(self, streams: list[dict[str, Any]], t: float) -> None:
        for s in streams:
            sid = s.get("id")
            if not isinstance(sid, str):
                continue
            st, sq = s.get("stNum"), s.get("sqNum")
            before = self.last.get(sid)
            self.last[sid] = (t, st, sq)
            if before is None or before[1] != st or not isinstance(sq, int):
                continue
            if not isinstance(before[2], int) or sq <= before[2]:
                continue
            interval = (t - before[0]) * 1000 / (sq - before[2])
            self.spark.setdefault(sid, deque(maxlen=SPARK)).append(round(interval, 1))

    def view(self) -> dict[str, list[float]]:
        return {k: list(v) for k, v in self.spark.items()}


class Poller:
    """A thread that polls once per `poll_s` and publishes a payload; event streams wait
    on `cond` and read `payload_of(key)` when `version` moved."""

    def __init__(self, poll_s: float) -> None:
        self.poll_s = poll_s
        self.cond = threading.Condition()
        self.version = 0
        self.payload: dict[str, Any] = {}
        #: the trip latency histogram (SVG text), when there is one
        self.svg: str | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="web-poller", daemon=True)

    def start(self) -> None:
        self.poll()
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.cond:
            self.cond.notify_all()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.poll()

    def poll(self) -> None:
        raise NotImplementedError

    def payload_of(self, key: str | None) -> dict[str, Any]:
        """What a page showing `key` (None: the page's own bay) is sent."""
        return self.payload

    def _publish(self) -> None:
        with self.cond:
            self.version += 1
            self.cond.notify_all()


class Hub(Poller):
    """Polls the controller and the journal's limit rows; pages wait on `cond`."""

    def __init__(self, controller: Controller, journal: JournalReader, poll_s: float = 1.0) -> None:
        super().__init__(poll_s)
        self.controller = controller
        self.journal = journal
        self.alarms = AlarmBook()
        self.retrans = Retransmissions()
        self._drawn: list[Any] = []
        self._drawn_t = 0.0
        #: which drawing `svg` is (0: none yet); a page fetches the image when it moves
        self.histogram = 0
        self._limit_seq = 0

    def _histogram(self, trips: list[Any], t: float) -> None:
        """Drawn again when the latencies changed (the controller keeps its last 256, so
        their count stops moving once it has them), at most every HISTOGRAM_S: a page
        fetches and paints each drawing, and a person reads a histogram, not its frames."""
        if not trips or trips == self._drawn or t - self._drawn_t < HISTOGRAM_S:
            return
        self._drawn, self._drawn_t = trips, t
        self.svg = render_svg(
            {"frame in -> command to the device": [int(x) for x in trips]},
            "trip and close latency (the controller's last ones)",
        )
        self.histogram += 1

    def poll(self) -> None:
        status = self.controller.ask({"op": "controller"})
        listing = self.controller.ask({"op": "list"}) if status.get("ok") else {}
        t = time.time()
        self.alarms.update(conditions(status))
        # the newest seq first: the rows up to it are scanned once, never again (a scan from
        # the last limit row would read the whole journal every second on a quiet one)
        top = self.journal.max_seq()
        limits = self.journal.after(self._limit_seq, 10_000, machine_prefix="limit:")
        for row in limits:
            if row["seq"] > top:
                break  # came after `top`: read with the next poll
            self._limit_seq = row["seq"]
            self.alarms.limit_row(row)
        if len(limits) < 10_000:  # every limit row up to `top` was read
            self._limit_seq = max(self._limit_seq, top)
        self.retrans.update(status.get("streams", []) if status.get("ok") else [], t)
        trips = status.get("trip_latency_ns") or []
        self._histogram(trips, t)
        self.payload = {
            "controller": status,
            "sessions": listing.get("sessions", []) if listing.get("ok") else [],
            "host": listing.get("host"),
            "alarms": self.alarms.rows(),
            "retransmission_ms": self.retrans.view(),
            "trips": len(trips),
            "histogram": self.histogram,
            "journal_error": self.journal.error,
            "polled": _utc(t),
        }
        self._publish()
