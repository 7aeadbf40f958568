"""Transition latency in process: trip frame bytes in -> TRIP bytes for the serial port, and
-> trip-acknowledged GOOSE frame bytes built. Used by `goosectl bench` and benchmarks/.

The bay controller runs with the firmware simulator on a virtual wire, so between samples
the breaker is re-closed in virtual time (spring charge included) at no wall-time cost;
only the call that handles the trip frame is timed, with `perf_counter_ns`, and the two
moments the effects exist are taken by wrapping the two calls that produce them.

As in production (`goosectl run`): the garbage collector stays on while a trip is timed (a
collection that lands on the frame path is part of the tail) after a collect and
`gc.freeze()` at the start, as the live loop does (`close` unfreezes); with ``journal`` given
the bay journals every transition through `LiveJournals`, the very journal and writer
thread `run` uses; the loop's group flush (a queue append) runs after the effects, where
the live loop runs it.

`idle_s`: how long the controller sits idle (asleep, as the live loop sleeps in `select`)
before each timed trip. Back to back (0) the trip path is in the CPU's caches from the
previous sample; a real trip comes after quiet, and on a shared host the caches are not
ours while we sleep: measured here, the same trip takes about 2x as long after 1 ms asleep,
3-4x after 5 ms and 5x after 20 ms. The wire benchmark's peer waits 5 ms between trips.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.config.load import load_config
from goosectl.controller.demo.scenario import CILO, EPOCH, S, publishers_config
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.controller.shell.journal_writer import LiveJournals
from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.goose import Boolean, Quality

MS = 1_000_000


@dataclass
class Samples:
    to_serial: list[int] = field(default_factory=list)
    to_ack_frame: list[int] = field(default_factory=list)
    whole_call: list[int] = field(default_factory=list)


class TripBench:
    def __init__(
        self,
        config: Path = DEFAULT_CONFIG,
        journal: Path | None = None,
        idle_s: float = 0.0,
        reflex: bool = False,
        keys: KeyFile | None = None,
        key_id: int | None = None,
        keep_warm_s: float = 0.0,
    ) -> None:
        """`keys`, `key_id`: the trip stream signed (IEC 62351-6) with that key and its
        subscription `auth: required`, the same path otherwise (benchmarks/test_auth_bench).
        `keep_warm_s`, with the reflex: while idle, the armed path rehearsed this often, as
        `run`'s loop does (`Arming.rehearse`), from a random phase (a trip comes when it
        comes); 0: asleep throughout."""
        self.idle_s = idle_s
        self.keep_warm_s = keep_warm_s
        self._phase = random.Random(0)
        self._arming: Any = None
        #: time (and count) the reflex's path instead: the arming made untimed after the
        #: re-close, the timed call its match and outputs, the engine's call after it
        self.reflex = reflex
        self._after_call: Callable[[], None] = lambda: None
        cfg = load_config(config, ControllerConfig)
        if keys is not None:
            subs = [
                s.model_copy(update={"auth": "required"}) if s.name == "prot" else s
                for s in cfg.goose.subscriptions
            ]
            cfg = cfg.model_copy(
                update={"goose": cfg.goose.model_copy(update={"subscriptions": subs})}
            )
        self._switch_interval = sys.getswitchinterval()  # LiveJournals lowers it, as run does
        self.journals = LiveJournals(journal, None) if journal is not None else None
        self.journal = self.journals.bay if self.journals is not None else None
        self._writer = self.journals.writer if self.journals is not None else None
        self.bay = BayController(cfg, EPOCH, self.journal, keys)
        self.fw = Firmware(now_ns=EPOCH)
        self.wire = VirtualWire(self.bay, self.fw, start_ns=EPOCH)
        # the protection IED's trip and bay 2's interlock: a close needs a valid permit
        ieds = [p for p in publishers_config().publishers if p.name in ("prot-A", CILO)]
        if keys is not None:
            ieds = [
                p.model_copy(update={"auth": "sign", "key_id": key_id}) if p.name == "prot-A" else p
                for p in ieds
            ]
        self.ied = GooseHub(GooseConfig(publishers=ieds), keys=keys)
        self.ied_id = "pub:prot-A"
        self.bay.start(EPOCH)
        self.bay.opened(EPOCH)
        self.wire.run_until(EPOCH + 100 * MS)
        t = self.wire.now_ns
        for e in self.ied.start(t, t):
            self.bay.frame(e.data, "A", t)
        self.marks: dict[str, int] = {}
        self._instrument()

    def _instrument(self) -> None:
        link, hub = self.bay.link, self.bay.hub
        send, publish = link.send_command, hub.publish
        clock = time.perf_counter_ns

        def timed_send(*a, **kw):
            r = send(*a, **kw)
            self.marks.setdefault("serial", clock())
            return r

        def timed_publish(*a, **kw):
            r = publish(*a, **kw)
            self.marks.setdefault("ack", clock())
            return r

        # the measured calls, wrapped on these instances to stamp when they happen
        link.send_command = timed_send  # type: ignore[method-assign]
        hub.publish = timed_publish  # type: ignore[method-assign]

    def _trip_frame(self, value: bool, t: int) -> bytes:
        """The protection IED's new state (its due retransmissions are delivered first)."""
        self._run_until(t)
        self.ied.scheduler.feed(
            self.ied_id, "publish", t, ((Boolean(value), Quality().to_bitstring()), t)
        )
        return self.ied.drain()[-1].data

    def _run_until(self, t: int) -> None:
        """Virtual time for the wire and the IED's heartbeats, so no stream goes stale."""
        while (d := self.ied.next_deadline()) is not None and d <= t:
            self.wire.run_until(d)
            for e in self.ied.advance(d):
                self.bay.frame(e.data, "A", d)
        self.wire.run_until(t)
        if self.journal is not None:
            self.journal.maybe_flush(t)

    def _reclose(self) -> None:
        """Untimed: trip signal back to false, wait for the spring, close, wait."""
        w = self.wire
        self.bay.frame(self._trip_frame(False, w.now_ns), "A", w.now_ns)
        self._run_until(w.now_ns + 6 * S)
        self.bay.close_request(w.now_ns)
        # past the device's anti-pumping window (a trip right after a close locks it out)
        self._run_until(w.now_ns + 500 * MS)
        if self.bay.bay.state != "closed":
            raise RuntimeError(f"breaker did not re-close: bay is {self.bay.bay.state}")
        if self._writer is not None and self.journal is not None:
            # the re-close ran seconds of heartbeats in milliseconds of wall time: the
            # writer commits them now, as it would have over those seconds in production,
            # instead of competing for the GIL with the timed trip on a 200x backlog
            self.journal.flush(w.now_ns)
            if not self._writer.drain(5.0):
                raise RuntimeError("the journal writer did not drain within 5 s")

    def sample(
        self, n: int, warmup: int = 20, around: Callable[[Callable[[], None]], None] | None = None
    ) -> Samples:
        """`n` trips after `warmup` untimed ones. `around(call)`, if given, makes each of
        the `n` measured calls (`lab.trip_work` runs them inside a callgrind bracket)."""
        out = Samples()
        clock = time.perf_counter_ns
        gc.collect()  # as LiveGoose.run starts: what exists now is never walked again
        gc.freeze()
        for i in range(warmup + n):
            self._reclose()
            now = self.wire.now_ns
            frame = self._trip_frame(True, now)
            self.marks.clear()
            call: Callable[[], None] = partial(self.bay.frame, frame, "A", now)
            if self.reflex:
                call = self._reflex_call(frame, now)
            if self.idle_s:
                self._idle(now)
            t0 = clock()
            if around is not None and i >= warmup:
                around(call)
            else:
                call()
            if self.reflex:
                self._after_call()
            t1 = clock()
            if self.reflex:
                self.bay.frame(frame, "A", now)  # the engine after the reflex, untimed
            if "serial" not in self.marks or "ack" not in self.marks:
                raise RuntimeError("the trip frame did not produce a TRIP and an ack")
            if i >= warmup:
                out.to_serial.append(self.marks["serial"] - t0)
                out.to_ack_frame.append(self.marks["ack"] - t0)
                out.whole_call.append(t1 - t0)
            self._run_until(now + 100 * MS)  # the TRIP travels, the breaker opens
            if self.bay.bay.state != "open":
                raise RuntimeError(f"breaker did not open: bay is {self.bay.bay.state}")
        return out

    def _idle(self, now: int) -> None:
        """`idle_s` asleep before the trip; with `keep_warm_s` and the reflex, woken that
        often to rehearse the armed path (the loop's `LiveReflex.rehearse`)."""
        warm, arming = self.keep_warm_s, self._arming
        if not (warm and arming is not None):
            time.sleep(self.idle_s)
            return
        end = time.monotonic() + self.idle_s
        at = time.monotonic() + self._phase.uniform(0.0, warm)
        utc = now + self.bay.utc_offset_ns
        while at < end:
            time.sleep(max(0.0, at - time.monotonic()))
            arming.rehearse(now, utc)
            at += warm
        time.sleep(max(0.0, end - time.monotonic()))

    def _reflex_call(self, frame: bytes, now: int) -> Callable[[], None]:
        """The reflex's frame path for `frame`, armed now (untimed): the call is its match,
        after which the TRIP bytes are ready to write (stamped `serial`); the ack frame's
        UTC is filled in after it (stamped `ack`), outside a callgrind bracket."""
        from goosectl.controller.logic.reflex import arm, trip_rules

        arming = arm(self.bay, trip_rules(self.bay)[0])
        if arming is None:
            raise RuntimeError("the reflex did not arm for the trip")
        self._arming = arming
        clock = time.perf_counter_ns
        utc = now + self.bay.utc_offset_ns
        marks = self.marks

        def call() -> None:
            if not arming.match(frame, "A", now, None):
                raise RuntimeError("the reflex did not fire on the trip frame")
            marks["serial"] = clock()  # arming.emitted.device: the TRIP, ready

        def ack() -> None:
            arming.outputs(utc)
            marks["ack"] = clock()

        self._after_call = ack
        return call

    @property
    def journal_rows(self) -> int:
        """Rows the writer thread committed (proof the journal was on); 0 without one."""
        return self._writer.committed_rows if self._writer is not None else 0

    def close(self) -> None:
        """Flush and close the journal (writer thread joined); restore the switch interval."""
        if self.journals is not None:
            if self.journal is not None:  # always, with a journal path
                self.journal.flush()
            self.journals.close()
            self.journals = None
        sys.setswitchinterval(self._switch_interval)
        gc.unfreeze()
