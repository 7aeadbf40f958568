"""The trip reflex in the live loop: fire on a matching frame, then keep the device's
command exactly once.

On a frame an arming matches (`controller/logic/reflex.py`), the TRIP bytes go to the
port and the trip-acknowledged frame to the wire before the engine sees the frame; then
the frame goes through the engine exactly as without a reflex. When the engine, at its
`urgent` moments, queues the same device bytes and builds the same frames, they are taken
out of its outputs, so the device gets one TRIP and the wire one ack. If the engine emits
anything else, or not all of what the reflex sent, that is the `reflex_disagreed` alarm
and a journal meta entry naming both (the engine's outputs that differ are written and
sent as always): never silent.

The journal's rows are the engine's and so the same with or without the reflex (a replay
has none); what the reflex did is kept in the journal's meta (`reflex.fired`, the count,
and `reflex.disagreed`, the last disagreement), not in its rows.

Arming previews the engine's steps (`controller/logic/reflex.py`: pure, no copy of the
controller), after a round of the loop in which something it read changed, never between
a frame's read and its TRIP.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from goosectl.controller import logs
from goosectl.controller.engine.effects import Alarm
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.reflex import Arming, Emitted, arm, fingerprint_of, trip_rules

log = logging.getLogger(__package__)

#: how often `run` rehearses the armed path by default (ms): the loop then wakes about a
#: thousand times a second while a trip is armed (docs/reflex.md, Keep-warm, its cost)
KEEP_WARM_MS = 1.0


class LiveReflex:
    """The armings of a live bay and what the reflex sent for the frame being handled."""

    def __init__(
        self,
        bay: BayController,
        write: Callable[[bytes], object],
        send: Callable[[list[SendFrame]], list[SendFrame]],
        keep_warm_ns: int = 0,
    ) -> None:
        """`write(bytes)` hands bytes to the port now; `send(frames)` sends frames now and
        returns them with the sides they still need (`LiveGoose.send_early`);
        `keep_warm_ns`: rehearse the armed path at least this often (0: never)."""
        self.bay = bay
        self.keep_warm_ns = keep_warm_ns
        #: when the armed path was last rehearsed, and how many armings were
        self._warm_at = 0
        self.rehearsed = 0
        self.write, self.send = write, send
        self.rules = trip_rules(bay)
        self.armings: list[Arming | None] = [None] * len(self.rules)
        #: per rule that could not be armed: the check that nothing changed since
        self._refused: list[Callable[[], bool] | None] = [None] * len(self.rules)
        #: what the reflex sent for the frame in hand, the parts the engine has not yet
        #: emitted itself: device bytes, frames by their bytes
        self._device = b""
        self._frames: dict[bytes, SendFrame] = {}
        self._sent: Emitted | None = None
        self.fired = 0
        #: of `fired`, the fires on a trailed frame before the LRE (`before_trailed`)
        self.fired_before_lre = 0
        self.disagreed = 0
        self.armed = 0
        self.arm_max_ns = 0
        #: how long each of the last armings took (the stop report's median)
        self.arm_ns: deque[int] = deque(maxlen=10_000)
        #: rules whose arming raised (logged once): they trip through the engine alone
        self.broken: set[str] = set()
        #: alarms and frames for the loop's effects, after the input
        self.out: list[Any] = []
        #: the native LRE's verdict without its bookkeeping (`Lre.first_copy`), installed
        #: by `controller.shell.prp_live.attach`; None: no judging before the LRE
        self.first_copy: Callable[[bytes, int], bool] | None = None
        #: True from a fire in `before_trailed` to the same frame's `before`
        self._early = False
        #: (time, side) of the frame `before_trailed` refused on every arming's octets,
        #: until the same frame's `before` (a frame the LRE drops leaves it to the next)
        self._judged: tuple[int, str] | None = None

    # -- the frame path ---------------------------------------------------------------------

    def before(self, buf: bytes, side: str, now_ns: int, vlan: Any) -> bool:
        """Fire on `buf` if an arming matches: TRIP to the port, frames to the wire. A
        frame the reflex already fired on before the LRE (`before_trailed`) is not judged
        again: its outputs are sent, and `urgent` and `after` settle them; nor is one it
        refused there on every arming's octets."""
        if self._early:
            self._early = False
            return True
        if self._judged is not None:
            judged, self._judged = self._judged, None
            if judged == (now_ns, side):
                return False
        for a in self.armings:
            if a is not None and a.match(buf, side, now_ns, vlan):
                self._fire(a, now_ns)
                return True
        return False

    def before_trailed(self, buf: bytes, side: str, now_ns: int, vlan: Any) -> bool:
        """With native PRP, before the LRE sees the frame (`LiveGoose.before_lre`): fire
        on `buf` if it is an arming's candidate with a valid trailer for this port and the
        LRE would hand it up as a first copy (`Arming.match_trailed`). The LRE counts it
        and the engine handles it after the TRIP is written, as on any frame the reflex
        fires on. Why nothing can fire twice: the loop is single-threaded, and once the
        first copy is handled the arming is stale (the stream is at the candidate's stNum,
        the breaker tripping) until `rearm` makes one for stNum + 1, which the other LAN's
        copy of this frame is not; a frame the LRE would drop never matches."""
        first = self.first_copy
        if first is None:
            return False
        judged = True
        for a in self.armings:
            if a is None:
                continue
            got = a.match_trailed(buf, side, now_ns, vlan, first)
            if got:
                self._fire(a, now_ns)
                self._early = True
                self.fired_before_lre += 1
                return True
            if got is None:
                judged = False
        # every arming refused the frame on its octets: `before` would refuse what the
        # LRE hands up too (a retransmission is not compared twice)
        self._judged = (now_ns, side) if judged else None
        return False

    def _fire(self, a: Arming, now_ns: int) -> None:
        """The TRIP to the port first (its bytes do not depend on the time), then the
        frames, the bay's UTC filled in, to the wire; kept for `urgent`/`after`."""
        self.write(a.emitted.device)
        out = a.outputs(now_ns + self.bay.utc_offset_ns)
        left = self.send(list(out.frames))
        self._sent = out
        self._device = out.device
        self._frames = {f.data: g for f, g in zip(out.frames, left, strict=True)}
        self.fired += 1

    def urgent(self) -> None:
        """At the engine's urgent moment: take out of its outputs what the reflex sent."""
        if self._sent is None:
            return
        bay = self.bay
        if self._device:
            out = bay.link.take_output()
            n = len(self._device)
            if out[:n] == self._device:
                out, self._device = out[n:], b""
            elif out and self._device.startswith(out):
                out, self._device = b"", self._device[len(out) :]
            if out:
                self.write(out)
        if self._frames:
            keep = []
            for f in bay.take_frames():
                sent = self._frames.pop(f.data, None)
                if sent is None:
                    keep.append(f)
                else:
                    self.out.append(sent)  # the sides it still needs, as send_early's
            bay.frames[:0] = keep

    def after(self, now_ns: int) -> list[Any]:
        """After the engine handled the frame: what it did not emit of what the reflex
        sent is an alarm and a meta entry; returns the effects for the loop."""
        sent = self._sent
        if sent is not None:
            self._sent = None
            journal = self.bay.scheduler.journal
            if journal is not None:
                journal.set_meta("reflex.fired", self.fired)
            if self._device or self._frames:
                self.disagreed += 1
                detail = (
                    f"the reflex wrote {sent.device.hex()} and sent {len(sent.frames)} "
                    f"frame(s); the engine did not emit {self._device.hex() or 'nothing'} "
                    f"of the device bytes and {len(self._frames)} of the frames"
                )
                logs.event(log, logging.ERROR, "reflex_disagreed", "%s", detail)
                self.out.append(Alarm("reflex_disagreed", True, detail))
                if journal is not None:
                    journal.set_meta(
                        "reflex.disagreed",
                        {"time_ns": now_ns, "reflex": sent.device.hex(), "missing": detail},
                    )
            self._device, self._frames = b"", {}
        out, self.out = self.out, []
        return out

    def counts(self) -> dict[str, int]:
        """For `run`'s stop report: fires, disagreements, armings made, how long the median
        and the longest took (the loop does nothing else meanwhile)."""
        return {
            "fired": self.fired,
            "fired_before_lre": self.fired_before_lre,
            "disagreed": self.disagreed,
            "armed": self.armed,
            "rehearsed": self.rehearsed,
            "arm_p50_us": sorted(self.arm_ns)[len(self.arm_ns) // 2] // 1000 if self.arm_ns else 0,
            "arm_max_us": self.arm_max_ns // 1000,
        }

    # -- off the frame path: keep-warm and arming ---------------------------------------------

    def rehearse(self, now_ns: int) -> None:
        """Keep-warm: once `keep_warm_ns` has passed since the last time, every arming's
        path run on its own candidate with nothing written or sent (`Arming.rehearse`), so
        a trip after a long quiet finds its code and data in the caches, where without it
        the match runs several times slower (docs/reflex.md, Keep-warm)."""
        if not self.keep_warm_ns or now_ns - self._warm_at < self.keep_warm_ns:
            return
        self._warm_at = now_ns
        utc = now_ns + self.bay.utc_offset_ns
        for a in self.armings:
            if a is not None:
                a.rehearse(now_ns, utc)
                self.rehearsed += 1

    def wake_within(self) -> float | None:
        """The longest the loop may sleep for the next rehearsal, in seconds; None while
        there is no keep-warm or nothing is armed (the loop sleeps to its timers)."""
        if self.keep_warm_ns and any(a is not None for a in self.armings):
            return self.keep_warm_ns / 1e9
        return None

    def rearm(self) -> int:
        """Arm every rule whose arming is missing or stale; the number armed now."""
        for i, rule in enumerate(self.rules):
            a = self.armings[i]
            if a is not None and a.same():
                continue
            refused = self._refused[i]
            if a is None and refused is not None and refused():
                continue  # nothing changed since it could not be armed
            t0 = time.perf_counter_ns()
            try:
                a = arm(self.bay, rule)
            except Exception as exc:  # an arming that raised: the engine's path alone
                if rule.name not in self.broken:
                    self.broken.add(rule.name)
                    logs.event(
                        log, logging.ERROR, "reflex_unarmed",
                        "the reflex cannot arm %s, the engine trips alone: %r", rule.name, exc,
                    )  # fmt: skip
                a = None
            self.armings[i] = a
            took = time.perf_counter_ns() - t0
            self.arm_ns.append(took)
            self.arm_max_ns = max(self.arm_max_ns, took)
            self.armed += a is not None
            self._refused[i] = fingerprint_of(self.bay)[0] if a is None else None
        return sum(a is not None for a in self.armings)
