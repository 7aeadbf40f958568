"""The trip reflex never acts where the engine would not, and acts as the engine does.

The oracle is the engine itself: on random controller histories (modes, simulation, the
breaker open or closed, the protection stream refused for every reason the receive rules
name, lost, in conflict, time moving on) a reflex is armed at some point, more history
follows, and then a frame arrives: the next trip frame as the protection IED sends it, or
a copy of it changed where a refusal lives (simulation, quality, confRev, ndsCom, the
source, the stNum, a stale `t`, a TAL out of bound, any octet). Whenever the arming
matches the frame, the engine given the same frame at the same time writes exactly the
device bytes and sends exactly the frames the reflex would have (the bay's UTC filled in).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from functools import cache
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from goosectl.controller.config.keys import KeyFile
from goosectl.controller.demo.scenario import EPOCH
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.reflex import Arming, Emitted, arm, candidate, trip_rules
from goosectl.lab.latency import MS, TripBench
from goosectl.protocols.goose import Boolean, GooseError, Quality, Vlan, parse_header
from goosectl.protocols.goose.security import ALGORITHMS, PROFILES, MacKey, sign
from goosectl.protocols.goose.security import parse as parse_extension
from tests.goose.keyfiles import keyfile
from tests.support.examples import examples

SECOND = 1000 * MS
SECRET = bytes(range(1, 33))
#: key ids: the stream's HMAC and GMAC keys, one expired an hour before the bench's start,
#: and one the key file does not hold (its secret the HMAC key's)
HMAC, GMAC, EXPIRED, UNKNOWN = 7, 8, 5, 9
YEAR = 365 * 24 * 3600 * SECOND
KEYS = {
    HMAC: MacKey(HMAC, ALGORITHMS["hmac-sha256-128"], SECRET),
    GMAC: MacKey(GMAC, ALGORITHMS["aes-gmac-128"], SECRET[:16]),
    EXPIRED: MacKey(EXPIRED, ALGORITHMS["hmac-sha256-128"], SECRET),
    UNKNOWN: MacKey(UNKNOWN, ALGORITHMS["hmac-sha256-128"], SECRET),
}


@cache
def key_file() -> KeyFile:
    import tempfile
    from pathlib import Path

    entries = [
        {"key_id": k, "algorithm": KEYS[k].algorithm.name, "secret": s, "not_before": 0,
         "not_after": EPOCH + (-3600 * SECOND if k == EXPIRED else 10 * YEAR)}
        for k, s in ((HMAC, SECRET), (GMAC, SECRET[:16]), (EXPIRED, SECRET))
    ]  # fmt: skip
    return keyfile(Path(tempfile.mkdtemp(prefix="reflex-keys-")), entries)


@cache
def _base(key_id: int | None = None) -> TripBench:
    bench = TripBench() if key_id is None else TripBench(keys=key_file(), key_id=key_id)
    bench._reclose()
    return bench


def fresh(key_id: int | None = None) -> TripBench:
    """A bench of its own, the breaker closed, the trip stream valid at FALSE; with
    `key_id`, the stream signed with that key and subscribed `auth: required`."""
    bench = copy.deepcopy(_base(key_id))
    # the base's instrumentation would stamp the base's clock: the engine's own methods
    for obj in (bench.bay.link, bench.bay.hub):
        for name in [n for n in vars(obj) if callable(getattr(type(obj), n, None))]:
            delattr(obj, name)
    return bench


def engine_outputs(
    bay: BayController, buf: bytes, side: str, now: int, vlan: Vlan | None = None
) -> Emitted:
    """What the engine writes at its urgent moments for `buf` (the live shell's early
    outputs), taken from the bay itself; `vlan`: the frame's tag given beside it."""
    device = bytearray()
    frames = []
    bay.take_frames()
    bay.link.take_output()

    def urgent() -> None:
        device.extend(bay.link.take_output())
        frames.extend(bay.take_frames())

    bay.urgent = urgent
    try:
        bay.frame(buf, side, now, vlan)
    finally:
        bay.urgent = None
    return Emitted(bytes(device), tuple(frames))


def ied_frame(bench: TripBench, value: bool, quality: Quality, t: int) -> bytes:
    bench._run_until(t)
    bench.ied.scheduler.feed(
        bench.ied_id, "publish", t, ((Boolean(value), quality.to_bitstring()), t)
    )
    return bench.ied.drain()[-1].data


QUALITIES = st.sampled_from(
    [
        Quality(),
        Quality(),
        Quality(validity="invalid"),
        Quality(validity="questionable"),
        Quality(test=True),
        Quality(operator_blocked=True),
    ]
)

history_step = st.one_of(
    st.tuples(st.just("state"), st.booleans(), QUALITIES),
    st.tuples(st.just("run"), st.integers(0, 3000)),
    st.tuples(st.just("silence"), st.sampled_from([1, 50, 150, 1000, 70_000])),
    st.tuples(st.just("mode"), st.sampled_from(["on", "test", "test-blocked", "off"])),
    st.tuples(st.just("simulation"), st.booleans()),
    st.tuples(st.just("mutant"), st.integers(0, 200), st.integers(1, 255)),
    st.tuples(st.just("reclose")),
)


def apply(bench: TripBench, step: tuple) -> None:
    bay, now = bench.bay, bench.wire.now_ns
    kind = step[0]
    if kind == "state":
        bay.frame(ied_frame(bench, step[1], step[2], now + MS), "A", now + MS)
    elif kind == "run":
        bench._run_until(now + step[1] * MS)
    elif kind == "silence":  # the IED says nothing: its stream may lapse
        bench.wire.run_until(now + step[1] * MS)
    elif kind == "mode":
        bay.set_mode(step[1], now)
    elif kind == "simulation":
        bay.set_simulation(step[1], now)
    elif kind == "mutant":  # the IED's next frame with one octet changed
        buf = bytearray(ied_frame(bench, False, Quality(), now + MS))
        i = step[1] % len(buf)
        buf[i] ^= step[2]
        bay.frame(bytes(buf), "A", now + MS)
    elif kind == "reclose" and bay.bay.state == "open" and bay.mode.state == "on":
        with contextlib.suppress(RuntimeError):
            bench._reclose()


def _flip_t(buf: bytes, t_at: int, delta_ns: int, quality: int | None) -> bytes:
    from goosectl.protocols.goose import UtcTime

    t = UtcTime.from_bytes(buf, t_at)
    new = UtcTime.from_ns(max(0, t.to_ns() + delta_ns))
    raw = UtcTime(new.seconds, new.fraction, t.quality if quality is None else quality)
    return buf[:t_at] + raw.to_bytes() + buf[t_at + 8 :]


final_frame = st.one_of(
    # the IED's own next trip, as it sends it (the case the reflex is for)
    st.just(("ied", True, Quality())),
    # the IED's own next frame: a trip with any quality, or not
    st.tuples(st.just("ied"), st.booleans(), QUALITIES),
    # the candidate the arming expects, with the parts a frame may vary
    st.tuples(
        st.just("spliced"),
        st.sampled_from([0, 1, 2, 20, 100, 200, 60_000, 60_001, 70_000, 1 << 20]),
        st.sampled_from([0, 1, -1, 1000, -10 * MS, -1000 * MS, 10 * SECOND]),
        st.sampled_from([None, 0x00, 0x20, 0x40, 0x0A]),
        st.one_of(st.none(), st.none(), st.tuples(st.integers(0, 200), st.integers(1, 255))),
        st.sampled_from([0, 1, 2]),  # stNum after the stream's: +1 (0), +2 (1), same (2)
        # one refusal of the receive rules written into the frame, or none
        st.sampled_from([None, None, "simulation", "s_bit", "confrev", "ndscom", "src"]),
    ),
)

#: goosePdu tags of the one-octet fields a refusal changes: simulation, confRev, ndsCom
REFUSAL_TAGS = {"simulation": 0x87, "confrev": 0x88, "ndscom": 0x89}


def refused(buf: bytes, how: str | None) -> bytes | None:
    """`buf` with one receive rule broken: simulation TRUE, the S-bit, confRev + 1, ndsCom
    TRUE, another source MAC; None where `buf` has no such element to change."""
    if how is None:
        return buf
    b = bytearray(buf)
    off = 16 if b[12:14] == b"\x81\x00" else 12
    if how == "src":
        b[11] ^= 0x01
    elif how == "s_bit":
        b[off + 6] |= 0x80
    else:
        tag = REFUSAL_TAGS[how]
        p = b.find(bytes((tag, 1)), off + 10)
        if p < 0:  # a mutant the stream kept lost the element: this rule cannot be broken
            return None
        b[p + 2] = (b[p + 2] + 1) & 0xFF if how == "confrev" else 1
    return bytes(b)


#: how a spliced frame of a signed stream is signed: (key id or None, TimeToNextKey)
signing = st.one_of(
    st.just((HMAC, -1)),  # as the IED signs (no next key: -1)
    st.tuples(st.sampled_from([HMAC, GMAC, EXPIRED, UNKNOWN, None]), st.sampled_from([-1, 5, 300])),
)


def signed_as(buf: bytes, how: tuple[int | None, int], own: int, iv: int) -> bytes:
    """`buf` signed with key `how[0]` (the stream's own algorithm if it is the HMAC id
    and the stream signs with GMAC), TimeToNextKey `how[1]`; unsigned for None."""
    key_id, ttnk = how
    if key_id is None:
        return buf
    if key_id == HMAC:
        key_id = own
    key = KEYS[key_id]
    iv_octets = iv.to_bytes(12) if key.algorithm.gmac else None
    try:
        return sign(buf, key, PROFILES["length-crc"], iv=iv_octets, time_to_next_key=ttnk)
    except GooseError:  # a flip made it no GOOSE frame: sent as it is
        return buf


@settings(
    max_examples=int(os.environ.get("REFLEX_EXAMPLES", examples(150))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    before=st.one_of(st.just([]), st.lists(history_step, max_size=4)),
    after=st.one_of(st.just([]), st.lists(history_step, max_size=3)),
    final=final_frame,
    side=st.sampled_from(["A", "A", "A", "B"]),
    # late: the frame comes after time the bay has not run (its timers due, as in the live
    # loop, which reads a frame before it fires them): repeats of its publishers due, or a
    # TAL
    late_ms=st.sampled_from([0, 0, 0, 0, 1, 5, 80, 150, 300, 500, 2000, 70_000]),
    # the stream unsigned, or signed with the HMAC or the GMAC key (`auth: required`)
    auth=st.sampled_from([None, None, HMAC, GMAC]),
    signer=signing,
    flip_signed=st.one_of(
        st.none(), st.none(), st.tuples(st.integers(0, 200), st.integers(1, 255))
    ),
)
def test_reflex_acts_only_as_the_engine_does(
    before, after, final, side, late_ms, auth, signer, flip_signed
):
    bench = fresh(auth)
    bay = bench.bay
    for step in before:
        apply(bench, step)
    rule = trip_rules(bay)[0]
    arming = arm(bay, rule)
    event(f"armed: {arming is not None}")
    for step in after:
        apply(bench, step)
    now = bench.wire.now_ns + MS
    stream = next(s for s in bay.hub.bank.streams.values() if s.label == rule.stream)
    if final[0] == "ied":
        buf = ied_frame(bench, final[1], final[2], now)
    else:
        _, tal, dt, tq, flip, st_add, how = final
        if stream.memory is None or stream.machine.ctx["st"] is None:
            return
        st_num = stream.machine.ctx["st"] + (1, 2, 0)[st_add]
        cand = candidate(stream.memory.buf, st_num, rule.index, tal)
        if cand is None:
            return
        broken = refused(_flip_t(cand.buf, cand.t_at, dt, tq), how)
        if broken is None:
            return
        buf = broken
        if flip is not None:
            b = bytearray(buf)
            b[flip[0] % len(b)] ^= flip[1]
            buf = bytes(b)
        if auth is not None:
            buf = signed_as(buf, signer, auth, now)
    if auth is not None and flip_signed is not None:  # anywhere: the MAC, the extension
        b = bytearray(buf)
        b[len(b) - 1 - flip_signed[0] % len(b)] ^= flip_signed[1]
        buf = bytes(b)
    now += late_ms * MS
    due = arming is not None and any(t.any_due(now) for t in arming.timers)
    fired = _judge(bench, arming, buf, side, now)
    event(f"auth {auth}: fired: {fired}" + (" (a timer due)" if fired and due else ""))


def note(what: str) -> None:
    """A hypothesis event, when inside a hypothesis test."""
    with contextlib.suppress(InvalidArgument):
        event(what)


def engine_state(bay: Any) -> tuple:
    """Everything of the engine a rehearsal could move: every machine's snapshot, the
    timers, the device bytes not taken, the link's next sequence number, queued frames."""
    machines = [*bay.scheduler.machines.values(), *bay.link.bus.machines.values()]
    return (
        [m.snapshot() for m in machines],
        [sorted(t._heap) for t in (bay.scheduler.timers, bay.link.bus.timers)],
        bytes(bay.link._out),
        bay.link.next_seq,
        list(bay.frames),
    )


def _judge(bench: TripBench, arming: Arming | None, buf: bytes, side: str, now: int) -> bool:
    """Whether the reflex fired; if it did, the engine's outputs are asserted equal (and
    its auth gate verified the frame); if it did not, the engine runs all the same, so a
    refusal of the gate is seen to go with a reflex that stayed silent. A keep-warm
    rehearsal runs first, as the live loop's would, and must move nothing of the engine."""
    bay = bench.bay
    if arming is not None:
        before = engine_state(bay)
        arming.rehearse(now, now + bay.utc_offset_ns)
        assert engine_state(bay) == before, "a rehearsal moved the engine"
    fired = arming is not None and arming.match(buf, side, now, None)
    if not fired:
        gate = bay.hub.bank.auth
        was = bay.bay.state
        engine_outputs(bay, buf, side, now)
        if gate is not None and gate.last is not None:
            verdict = gate.last.reason or gate.last.status
            tripped = was != "tripping" and bay.bay.state == "tripping"
            note(f"silent; the gate: {verdict}; the engine tripped: {tripped}")
            assert verdict == "verified" or not tripped, "the engine tripped on a refusal"
        return False
    assert arming is not None
    expected = arming.outputs(now + bay.utc_offset_ns)
    due = any(t.any_due(now) for t in arming.timers)
    got = engine_outputs(bay, buf, side, now)
    assert got.device == expected.device, "the engine wrote other device bytes"
    # a publisher's repeat that was due goes out first from the engine, after the TRIP and
    # the ack from the reflex: every other frame the same, in the same order
    new_states = [f for f in got.frames if parse_header(f.data).sq_num == 0]
    assert len(new_states) == len(got.frames) or due, "a repeat without a due timer"
    assert [(f.gocb_ref, f.sides, f.data) for f in new_states] == [
        (f.gocb_ref, f.sides, f.data) for f in expected.frames
    ], "the engine sent other frames"
    assert bay.bay.state == "tripping"
    gate = bay.hub.bank.auth
    if gate is not None:
        verdict, mode = gate.last, gate.last_policy.mode
        assert verdict is not None and verdict.status != "refused", verdict
        assert verdict.status == "verified" or mode == "optional", (verdict, mode)
    return True


def test_the_plain_trip_fires_and_matches_the_engine():
    """A valid stream at FALSE, the breaker closed: the IED's trip frame fires the reflex,
    and the engine writes the same TRIP and the same ack."""
    bench = fresh()
    arming = arm(bench.bay, trip_rules(bench.bay)[0])
    assert arming is not None
    now = bench.wire.now_ns + 3 * MS
    buf = ied_frame(bench, True, Quality(), now)
    assert _judge(bench, arming, buf, "A", now)


def test_a_publishers_repeat_due_at_the_trip_does_not_hold_the_reflex_back():
    """The live loop reads a frame before it fires the timers due meanwhile: a trip that
    comes while a publisher's repeat is due still fires, the engine sends the repeat and
    then the same TRIP and ack; a due timer that matters (the stream's TAL) refuses."""
    bench = fresh()
    bay = bench.bay
    arming = arm(bay, trip_rules(bay)[0])
    assert arming is not None
    live = bay.scheduler.timers._live
    repeat = min(t["retransmit"][0] for pid, t in live.items() if pid in bay.hub.publishers)
    tal = min(t["tal"][0] for t in live.values() if "tal" in t)
    assert repeat < tal and {(p, "retransmit") for p in bay.hub.publishers} == arming.harmless
    now = repeat + 1000
    buf = ied_frame_at(bench, True, now)
    assert not arming.match(buf, "A", tal + 1000, None)  # the TAL ran out: the engine's
    assert bay.scheduler.timers.any_due(now)
    assert _judge(bench, arming, buf, "A", now)


def ied_frame_at(bench: TripBench, value: bool, t: int) -> bytes:
    """The IED's frame stamped `t` without running the bay up to `t` (its timers stay due)."""
    bench.ied.scheduler.feed(
        bench.ied_id, "publish", t, ((Boolean(value), Quality().to_bitstring()), t)
    )
    return bench.ied.drain()[-1].data


def test_no_arming_where_the_engine_would_not_trip():
    """Off, test-blocked, simulation, an open breaker, an invalid trip input: no arming."""
    for setup in (
        lambda b: b.bay.set_mode("off", b.wire.now_ns),
        lambda b: b.bay.set_mode("test-blocked", b.wire.now_ns),
        lambda b: b.bay.set_simulation(True, b.wire.now_ns),
        lambda b: apply(b, ("state", True, Quality())),
        lambda b: apply(b, ("state", False, Quality(validity="invalid"))),
        lambda b: apply(b, ("silence", 70_000)),
    ):
        bench = fresh()
        setup(bench)
        assert arm(bench.bay, trip_rules(bench.bay)[0]) is None


def test_a_change_after_arming_disarms():
    """Armed, then the mode goes to test-blocked: the trip frame no longer matches."""
    bench = fresh()
    arming = arm(bench.bay, trip_rules(bench.bay)[0])
    assert arming is not None
    bench.bay.set_mode("test-blocked", bench.wire.now_ns)
    now = bench.wire.now_ns + MS
    assert not arming.match(ied_frame(bench, True, Quality(), now), "A", now, None)


class Shell:
    """The live shell's part around the reflex, without sockets: what reaches the port and
    the wire, in order."""

    def __init__(self, bench: TripBench, keep_warm_ns: int = 0) -> None:
        from goosectl.controller.shell.reflex_live import LiveReflex

        self.bay = bench.bay
        self.port = bytearray()
        self.wire: list[bytes] = []
        self.reflex = LiveReflex(self.bay, self.port.extend, self._send, keep_warm_ns)
        self.bay.urgent = self._urgent
        self.bay.take_frames()

    def _send(self, frames: list) -> list:
        self.wire.extend(f.data for f in frames)
        return [dataclasses.replace(f, sides=()) for f in frames]

    def _urgent(self) -> None:  # BayLive._urgent's order: the reflex's share first
        self.reflex.urgent()
        self.port.extend(self.bay.link.take_output())
        self._send(self.bay.take_frames())

    def frame(self, buf: bytes, now: int) -> list:
        fired = self.reflex.before(buf, "A", now, None)
        self.bay.frame(buf, "A", now)
        return [fired, *self.reflex.after(now)]


def test_the_device_gets_one_trip_and_the_wire_one_ack():
    """The reflex fires; the engine then emits the same TRIP and ack, which the shell does
    not write or send a second time."""
    bench = fresh()
    shell = Shell(bench)
    assert shell.reflex.rearm() == 1
    now = bench.wire.now_ns + 2 * MS
    buf = ied_frame(bench, True, Quality(), now)
    expected = shell.reflex.armings[0].outputs(now + bench.bay.utc_offset_ns)
    fired, *effects = shell.frame(buf, now)
    assert fired
    assert bytes(shell.port) == expected.device
    acks = [f for f in shell.wire if b"tripack" in f]
    assert acks == [f.data for f in expected.frames]
    assert not any(type(e).__name__ == "Alarm" for e in effects)
    assert bench.bay.bay.state == "tripping"
    assert shell.reflex.fired == 1 and shell.reflex.disagreed == 0


def test_keep_warm_rehearses_while_armed_and_writes_and_sends_nothing():
    """Rehearsals come once a period has passed, only while something is armed, and
    leave the port and the wire untouched and the engine unmoved; the trip after them
    fires once with the engine's bytes, as without them."""
    bench = fresh()
    shell = Shell(bench, keep_warm_ns=MS)
    reflex = shell.reflex
    assert reflex.wake_within() is None  # nothing armed yet: the loop sleeps to its timers
    assert reflex.rearm() == 1
    assert reflex.wake_within() == MS / 1e9
    t0 = bench.wire.now_ns
    before = engine_state(bench.bay)
    for k in range(40):  # a round every quarter period: a rehearsal every fourth
        reflex.rehearse(t0 + MS + k * MS // 4)
    assert reflex.rehearsed == 10
    assert engine_state(bench.bay) == before
    assert not shell.port and not shell.wire
    now = t0 + 12 * MS
    buf = ied_frame(bench, True, Quality(), now)
    expected = reflex.armings[0].outputs(now + bench.bay.utc_offset_ns)
    fired, *_ = shell.frame(buf, now)
    assert fired and bytes(shell.port) == expected.device
    assert [f for f in shell.wire if b"tripack" in f] == [f.data for f in expected.frames]
    assert reflex.fired == 1 and reflex.disagreed == 0
    off = Shell(fresh())
    off.reflex.rearm()
    off.reflex.rehearse(t0 + 10 * MS)
    assert off.reflex.rehearsed == 0 and off.reflex.wake_within() is None


def test_an_engine_that_disagrees_raises_an_alarm_and_its_own_bytes_still_go_out():
    """Should the engine emit other bytes than the reflex sent (here the arming is made
    wrong on purpose), the engine's bytes are written too and the alarm names both."""
    bench = fresh()
    shell = Shell(bench)
    shell.reflex.rearm()
    a = shell.reflex.armings[0]
    assert a is not None
    a.emitted = Emitted(b"\x00wrong\x00", a.emitted.frames)
    now = bench.wire.now_ns + 2 * MS
    fired, *effects = shell.frame(ied_frame(bench, True, Quality(), now), now)
    assert fired
    alarms = [e for e in effects if type(e).__name__ == "Alarm"]
    assert [x.name for x in alarms] == ["reflex_disagreed"]
    assert b"wrong".hex() in alarms[0].detail
    assert bytes(shell.port).startswith(b"\x00wrong\x00") and len(shell.port) > 7
    assert shell.reflex.disagreed == 1


def test_no_reflex_without_a_trip_frame():
    """A retransmission, or a frame that trips nothing, leaves the reflex silent."""
    bench = fresh()
    shell = Shell(bench)
    shell.reflex.rearm()
    now = bench.wire.now_ns + 2 * MS
    fired, *_ = shell.frame(ied_frame(bench, False, Quality(), now), now)
    assert not fired and not shell.port


def signed_trip(key_id: int) -> tuple[TripBench, Arming, bytes, int]:
    """A bench whose trip stream is signed with `key_id`, armed, and the IED's trip."""
    bench = fresh(key_id)
    arming = arm(bench.bay, trip_rules(bench.bay)[0])
    assert arming is not None and arming.signed is not None and not arming.by_len
    now = bench.wire.now_ns + 3 * MS
    return bench, arming, ied_frame(bench, True, Quality(), now), now


def test_a_signed_trip_fires_and_matches_the_engine():
    """HMAC and GMAC (a new IV every frame): the IED's signed trip fires the reflex, and
    the engine, its gate verifying the frame, writes the same TRIP and the same ack."""
    for key_id in (HMAC, GMAC):
        bench, arming, buf, now = signed_trip(key_id)
        assert _judge(bench, arming, buf, "A", now), key_id


def test_no_signed_forgery_fires_the_reflex():
    """`auth: required`: the IED's trip unsigned, signed with a key id the file does not
    hold (the right secret), with an expired key, with any single octet flipped (every
    position): where the reflex fires, the engine trips alike; the extension and the MAC
    flipped, and the forgeries, never fire, and the engine refuses them too."""
    bench, arming, buf, now = signed_trip(HMAC)
    bay = bench.bay
    stream = next(s for s in bay.hub.bank.streams.values() if s.label == "prot")
    unsigned = candidate(stream.memory.buf, stream.machine.ctx["st"] + 1, 0).buf
    tried = {
        "unsigned": _flip_t(unsigned, buf.index(b"\x84\x08", 40) + 2, 3 * MS, None),
        "unknown_key": signed_as(unsigned, (UNKNOWN, -1), HMAC, 0),
        "expired_key": signed_as(unsigned, (EXPIRED, -1), HMAC, 0),
    }
    for reason, forged in tried.items():
        assert not arming.match(forged, "A", now, None), reason
    ext_at = len(buf) - (2 + 16) - 14  # the extension's 34 octets: A0 20 A4 0C ... 85 10 MAC
    for i in range(len(buf)):
        copy_ = fresh(HMAC)
        again = arm(copy_.bay, trip_rules(copy_.bay)[0])
        assert again is not None
        flipped = bytearray(buf)
        flipped[i] ^= 0x01
        fired = _judge(copy_, again, bytes(flipped), "A", now)
        assert not (fired and i >= ext_at), f"flipped octet {i} of the extension fired"
    for reason, forged in tried.items():
        engine_outputs(bay, forged, "A", now)
        assert bay.hub.bank.auth.last.reason == reason and bay.bay.state != "tripping"


def test_a_forged_frame_does_not_put_the_next_genuine_trip_on_the_slow_path():
    """A forger's frame (the stream's next frame, its MAC wrong) is refused and its
    security event steps the auth machine; the loop re-arms after it. The genuine signed
    trip that comes next, before any genuine repeat, fires the reflex and the engine,
    whose gate journals it as the first verified frame after the refusal, trips alike.
    Before, the armed match wanted the policy's key id, which the refusal event clears,
    so one forgery a second kept every signed trip on the engine's path."""
    for key_id in (HMAC, GMAC):
        bench = fresh(key_id)
        bay, now = bench.bay, bench.wire.now_ns
        later = now + 3 * MS
        buf = ied_frame(bench, True, Quality(), later)  # the IED's trip, held back
        forged = bytearray(buf)
        forged[-1] ^= 0x01
        bay.frame(bytes(forged), "A", now + MS)
        gate = bay.hub.bank.auth
        assert gate.last is not None and gate.last.reason == "bad_mac"
        assert bay.bay.state != "tripping"
        arming = arm(bay, trip_rules(bay)[0])
        assert arming is not None and arming.signed is not None
        assert _judge(bench, arming, buf, "A", later), key_id
        (pol,) = gate.by_key.values()
        assert pol.key_id == key_id and pol.machine is not None
        assert pol.machine.state == "verified"


def test_a_reloaded_key_file_or_a_key_past_its_window_disarms_the_signed_match():
    """The key file replaced (a reload), or the frame after the key's not_after and grace:
    the signed trip no longer matches, the engine's path decides."""
    bench, arming, buf, now = signed_trip(HMAC)
    gate = bench.bay.hub.bank.auth
    assert arming.match(buf, "A", now, None)
    key = gate.keys.keys[HMAC]
    late = key.not_after_ns + gate.keys.grace_ns + 1 - gate.utc_offset_ns
    assert arming.signed is not None and late > arming.signed.hi - gate.utc_offset_ns
    assert (
        arming.signed is not None
        and not arming.signed.lo <= late + gate.utc_offset_ns <= arming.signed.hi
    )
    gate.set_keys(dataclasses.replace(gate.keys))
    assert not arming.match(buf, "A", now, None)


def test_auth_optional_arms_both_the_signed_and_the_unsigned_trip():
    """`auth: optional`: the engine acts on an unsigned trip and on a verified one, so the
    reflex arms both; a signed trip with a bad MAC fires neither (the engine refuses it)."""
    for signed in (True, False):
        bench = fresh(HMAC)
        gate = bench.bay.hub.bank.auth
        for pol in gate.by_key.values():
            pol.mode = "optional"
        arming = arm(bench.bay, trip_rules(bench.bay)[0])
        assert arming is not None and arming.by_len and arming.signed is not None
        now = bench.wire.now_ns + 3 * MS
        buf = ied_frame(bench, True, Quality(), now)
        if not signed:
            buf = parse_extension(buf, PROFILES["length-crc"]).unsigned
        bad = buf[:-1] + bytes((buf[-1] ^ 1,))
        assert not (signed and arming.match(bad, "A", now, None))
        assert _judge(bench, arming, buf, "A", now), signed
