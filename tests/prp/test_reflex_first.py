"""The trip reflex judges a PRP-trailed frame before the LRE, and acts only as the LRE and
the engine after it do.

With `--prp native` the live loop hands each frame as it came (trailer on) to the reflex
first (`LiveReflex.before_trailed`, `Arming.match_trailed`), then to the LRE, which counts
it and drops a duplicate, then to the engine. The oracle is that later path itself: on
random controller histories, duplicate tables and frames (the next trip frame or a copy of
it changed where a refusal lives, with a valid trailer, the other LAN's LanId, a wrong
LSDUsize or suffix, no trailer, any octet flipped, a SeqNr the LRE has already seen), each
copy (this LAN's, the other LAN's, a third) is judged, then goes through the LRE and the
engine. Whenever the reflex fires, the LRE hands the frame up as a first copy and the
engine, given what it hands up, writes the same TRIP and sends the same ack; whenever the
LRE drops a copy or its trailer is not valid for the port, the reflex did not fire.
"""

from __future__ import annotations

import dataclasses
import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from goosectl.controller.logic.reflex import Arming, arm, candidate, trip_rules
from goosectl.controller.prp import Lre
from goosectl.lab.latency import MS, TripBench
from goosectl.lab.prp_work import live_shape, shape_frames
from goosectl.protocols.goose import Quality, Vlan, parse_header
from goosectl.protocols.prp import LAN_IDS, add_rct
from tests.logic.test_reflex import (
    _flip_t,
    apply,
    engine_outputs,
    fresh,
    history_step,
    ied_frame,
    refused,
)
from tests.support.examples import examples

OTHER = {"A": "B", "B": "A"}


def shaped(bench: TripBench) -> TripBench:
    """`bench` whose bay gets frames as the live loop hands them over: the VLAN tag out
    of the bytes (the kernel took it) and given beside them (`lab.prp_work`)."""
    shape_frames(bench.bay)
    # the stream's last frame (what the reflex splices its candidate from) as the live
    # loop keeps it: untagged, its tag beside it
    now = bench.wire.now_ns + MS
    bench.bay.frame(ied_frame(bench, False, Quality(), now), "A", now)
    return bench


def trailed(buf: bytes, seq: int, lan: int, how: str) -> bytes:
    """`buf` with a PRP trailer of SeqNr `seq` and LanId `lan`, spoilt as `how` says."""
    if how == "none":
        return buf
    out = bytearray(add_rct(buf, seq & 0xFFFF, lan))
    if how == "lsdu+1":
        out[-3] = (out[-3] + 1) & 0xFF
    elif how == "lsdu-1":
        out[-3] = (out[-3] - 1) & 0xFF
    elif how == "suffix":
        out[-1] ^= 0x01
    elif how == "lanid_c":
        out[-4] = (0xC << 4) | (out[-4] & 0x0F)
    return bytes(out)


TRAILERS = st.sampled_from(
    ["valid", "valid", "valid", "wrong_lan", "lsdu+1", "lsdu-1", "suffix", "lanid_c", "none"]
)
#: the next trip as the IED sends it, any frame of the IED, or the candidate spliced with
#: the parts a frame may vary and the refusals of the receive rules
final_frame = st.one_of(
    st.just(("ied", True, Quality())),
    st.tuples(st.just("ied"), st.booleans(), st.sampled_from([Quality(), Quality(test=True)])),
    st.tuples(
        st.just("spliced"),
        st.sampled_from([1, 20, 60_001]),
        st.sampled_from([0, -1000 * MS]),
        st.sampled_from([0, 1, 2]),
        st.sampled_from([None, None, "simulation", "confrev", "src"]),
    ),
)


def trip_frame(bench: TripBench, final: tuple, now: int) -> bytes | None:
    """The frame the IED sends at `now` (tagged, as on its wire), or None."""
    if final[0] == "ied":
        return ied_frame(bench, final[1], final[2], now)
    _, tal, dt, st_add, how = final
    bay = bench.bay
    rule = trip_rules(bay)[0]
    stream = next(s for s in bay.hub.bank.streams.values() if s.label == rule.stream)
    if stream.memory is None or stream.machine.ctx["st"] is None:
        return None
    cand = candidate(
        stream.memory.buf, stream.machine.ctx["st"] + (1, 2, 0)[st_add], rule.index, tal
    )
    if cand is None:
        return None
    return refused(_flip_t(cand.buf, cand.t_at, dt, None), how)


def judge(
    bench: TripBench,
    arming: Arming | None,
    lre: Lre,
    buf: bytes,
    port: str,
    now: int,
    vlan: Vlan | None,
) -> tuple[bool, bool]:
    """One copy as the live loop takes it: the reflex's judgment first, then the LRE, then
    the engine on what the LRE hands up. (fired, the LRE handed it up); the engine's
    outputs asserted equal to the reflex's whenever it fired."""
    bay = bench.bay
    verdict = None if arming is None else arming.match_trailed(buf, port, now, vlan, lre.first_copy)
    fired = bool(verdict)
    expected = arming.outputs(now + bay.utc_offset_ns) if fired and arming is not None else None
    up = lre.deliver(buf, port, now)
    if up is None:
        assert not fired, "the reflex fired on a copy the LRE drops"
        return False, False
    if not fired:
        if verdict is False:  # refused on the octets: the match after the LRE refuses too
            assert arming is not None and not arming.match(up, port, now, vlan)
            event("refused before the LRE, and after it")
        engine_outputs(bay, up, port, now, vlan)
        return False, True
    assert arming is not None and expected is not None
    assert up == buf[:-6], "the LRE handed up other bytes than the candidate"
    assert arming.match(up, port, now, vlan), "the reflex after the LRE would not fire"
    got = engine_outputs(bay, up, port, now, vlan)
    assert got.device == expected.device, "the engine wrote other device bytes"
    new_states = [f for f in got.frames if parse_header(f.data).sq_num == 0]
    assert [(f.gocb_ref, f.sides, f.data) for f in new_states] == [
        (f.gocb_ref, f.sides, f.data) for f in expected.frames
    ], "the engine sent other frames"
    assert bay.bay.state == "tripping"
    return True, True


@settings(
    max_examples=int(os.environ.get("REFLEX_EXAMPLES", examples(150))),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    before=st.one_of(st.just([]), st.lists(history_step, max_size=3)),
    final=final_frame,
    port=st.sampled_from(["A", "A", "B"]),
    how=TRAILERS,
    # (SeqNr offset from the trip frame's, ms before it) of copies the LRE has seen
    seen=st.lists(
        st.tuples(st.integers(-3, 1), st.sampled_from([1, 100, 399, 401, 2000])), max_size=3
    ),
    copies=st.lists(st.sampled_from(["other", "same", "other_wrong"]), max_size=2),
    flip=st.one_of(st.none(), st.none(), st.tuples(st.integers(0, 200), st.integers(1, 255))),
    late_ms=st.sampled_from([0, 0, 1, 150, 2000]),
)
def test_the_reflex_before_the_lre_acts_only_as_the_lre_and_the_engine_do(
    before, final, port, how, seen, copies, flip, late_ms
):
    bench = shaped(fresh())
    bay = bench.bay
    for step in before:
        apply(bench, step)
    rule = trip_rules(bay)[0]
    arming = arm(bay, rule)
    event(f"armed: {arming is not None}")
    now = bench.wire.now_ns + MS
    raw = trip_frame(bench, final, now)
    if raw is None:
        return
    buf, vlan = live_shape(raw)
    now += late_ms * MS
    seq = 1000
    lre = Lre()
    lan = LAN_IDS[OTHER[port]] if how == "wrong_lan" else LAN_IDS[port]
    for dseq, ago in sorted(seen, key=lambda s: -s[1]):  # oldest first, as they came
        lre.deliver(add_rct(buf, seq + dseq, LAN_IDS[port]), port, now - ago * MS)
    first = trailed(buf, seq, lan, how)
    if flip is not None:
        b = bytearray(first)
        b[flip[0] % len(b)] ^= flip[1]
        first = bytes(b)
    fired, up = judge(bench, arming, lre, first, port, now, vlan)
    # a flip into the SeqNr leaves a valid trailer (another SeqNr: a first copy unless the
    # LRE has seen it, which `judge` holds to the LRE's verdict); LanId, LSDUsize, suffix
    # flipped do not
    if how != "valid" or (flip is not None and first[-4:] != add_rct(buf, seq, lan)[-4:]):
        assert not fired, f"the reflex fired on a frame whose trailer is {how}"
    event(f"first copy ({how}): fired {fired}, handed up {up}")
    fires = int(fired)
    tripped = bay.bay.state == "tripping"  # by the reflex and the engine, or the engine
    for i, which in enumerate(copies):  # the other LAN's copy, a third copy, a crossed one
        if arming is None or not arming.same():  # the shell's rearm after the round
            arming = arm(bay, rule)
        p = port if which == "same" else OTHER[port]
        lan_c = LAN_IDS[port] if which == "other_wrong" else LAN_IDS[p]
        copy = trailed(buf, seq, lan_c, "valid")
        got, up_c = judge(bench, arming, lre, copy, p, now + (i + 1) * 1000, vlan)
        if tripped:
            assert not got, f"the reflex fired on a later copy ({which}) of a trip"
        fires += got
        event(f"copy {which}: fired {got}, handed up {up_c}")
    assert fires <= 1


class Shell:
    """The live shell's order around the reflex with native PRP, without sockets: the
    reflex on the frame as it came, the LRE, the engine; what reaches port and wire."""

    def __init__(self, bench: TripBench) -> None:
        from goosectl.controller.shell.reflex_live import LiveReflex

        self.bench = bench
        self.bay = bench.bay
        self.port = bytearray()
        self.wire: list[bytes] = []
        self.lre = Lre()
        self.reflex = LiveReflex(self.bay, self.port.extend, self._send)
        self.reflex.first_copy = self.lre.first_copy
        self.bay.urgent = self._urgent
        self.bay.take_frames()

    def _send(self, frames: list) -> list:
        self.wire.extend(f.data for f in frames)
        return [dataclasses.replace(f, sides=()) for f in frames]

    def _urgent(self) -> None:
        self.reflex.urgent()
        self.port.extend(self.bay.link.take_output())
        self._send(self.bay.take_frames())

    def frame(self, buf: bytes, port: str, now: int, vlan: Vlan | None) -> tuple[bool, list]:
        """`LiveGoose._read_side` then `BayGooseCore.frame`: (fired before the LRE, effects)."""
        fired = self.reflex.before_trailed(buf, port, now, vlan)
        up = self.lre.deliver(buf, port, now)
        if up is None:
            return fired, []
        self.reflex.before(up, port, now, vlan)
        self.bay.frame(up, port, now, vlan)
        effects = self.reflex.after(now)
        self.reflex.rearm()
        return fired, effects


def _trip(shell: Shell, now: int) -> tuple[bytes, Vlan | None]:
    return live_shape(ied_frame(shell.bench, True, Quality(), now))


def test_a_trailed_trip_fires_before_the_lre_which_then_counts_it_unique():
    """The IED's trip on LAN A with its trailer: the TRIP and the ack leave before the LRE
    has looked at the frame; the LRE then counts it (Rx, Unique), the engine trips and
    emits the same TRIP and ack, which are not written or sent again; LAN B's copy, a
    duplicate, is dropped by the LRE and fires nothing."""
    bench = shaped(fresh())
    shell = Shell(bench)
    assert shell.reflex.rearm() == 1
    now = bench.wire.now_ns + 2 * MS
    buf, vlan = _trip(shell, now)
    a = shell.reflex.armings[0]
    assert a is not None
    expected = a.outputs(now + bench.bay.utc_offset_ns)
    fired, effects = shell.frame(add_rct(buf, 7, LAN_IDS["A"]), "A", now, vlan)
    assert fired
    assert bytes(shell.port) == expected.device
    assert [f for f in shell.wire if b"tripack" in f] == [f.data for f in expected.frames]
    assert not any(type(e).__name__ == "Alarm" for e in effects)
    assert bench.bay.bay.state == "tripping"
    assert shell.reflex.fired == shell.reflex.fired_before_lre == 1
    assert shell.reflex.disagreed == 0
    fired_b, _ = shell.frame(add_rct(buf, 7, LAN_IDS["B"]), "B", now + 50_000, vlan)
    assert not fired_b and bytes(shell.port) == expected.device
    shell.lre.settle()
    counts = shell.lre.counts
    assert counts["lreCntRxA"] == 1 and counts["lreCntRxB"] == 1
    assert counts["lreCntDuplicateA"] == 1 and shell.reflex.fired == 1


def test_a_crossed_cable_or_a_bad_trailer_takes_the_engines_path():
    """LAN B's LanId on port A (a crossed cable), a wrong LSDUsize, a wrong suffix: the
    reflex does not fire before the LRE; the LRE counts and alarms as without a reflex
    (ErrWrongLan and the crossed-cable alarm; Errors; nothing, for a frame that is no PRP
    frame) and the engine trips on the crossed-cable frame it hands up (the reflex after
    the LRE fires there, as it does without PRP)."""
    for how, lan in (("valid", "B"), ("lsdu+1", "A"), ("suffix", "A")):
        bench = shaped(fresh())
        shell = Shell(bench)
        assert shell.reflex.rearm() == 1
        now = bench.wire.now_ns + 2 * MS
        buf, vlan = _trip(shell, now)
        fired, _ = shell.frame(trailed(buf, 9, LAN_IDS[lan], how), "A", now, vlan)
        assert not fired, how
        counts = shell.lre.counts
        if how == "valid":
            assert counts["lreCntErrWrongLanA"] == 1
            assert [a.kind for a in shell.lre.pending] == ["crossed_cable"]
            assert shell.reflex.fired == 1 and bench.bay.bay.state == "tripping"
        elif how == "suffix":  # no PRP frame at all: a SAN's, handed up as it came
            assert counts["lreCntRxA"] == 0 and counts["lreCntErrorsA"] == 0
        else:  # the suffix with a field wrong: the MIB's error counter
            assert counts["lreCntErrorsA"] == 1 and counts["lreCntRxA"] == 0


def test_a_trailed_repeat_is_refused_once_and_the_trip_after_it_still_fires():
    """The stream's last frame again with its trailer (a repeat of the candidate's length):
    refused before the LRE on its octets, not compared again after it, nothing written;
    the trip that follows fires before the LRE."""
    bench = shaped(fresh())
    shell = Shell(bench)
    assert shell.reflex.rearm() == 1
    bay = bench.bay
    rule = trip_rules(bay)[0]
    stream = next(s for s in bay.hub.bank.streams.values() if s.label == rule.stream)
    last, vlan = stream.memory.buf, stream.memory.tag
    a = shell.reflex.armings[0]
    assert a is not None and len(last) + 6 in a.trailed
    now = bench.wire.now_ns + MS
    reflex, trailed_last = shell.reflex, add_rct(last, 3, LAN_IDS["A"])
    assert a.match_trailed(trailed_last, "A", now, vlan, shell.lre.first_copy) is False
    assert not reflex.before_trailed(trailed_last, "A", now, vlan)
    assert reflex._judged == (now, "A")  # the verdict kept for the same frame's `before`
    up = shell.lre.deliver(trailed_last, "A", now)
    assert up == last and not reflex.before(up, "A", now, vlan)
    assert reflex._judged is None and not shell.port
    bay.frame(up, "A", now, vlan)
    reflex.after(now)
    now += 2 * MS
    buf, vlan = _trip(shell, now)
    fired, _ = shell.frame(add_rct(buf, 4, LAN_IDS["A"]), "A", now, vlan)
    assert fired and shell.reflex.fired_before_lre == 1 and bench.bay.bay.state == "tripping"
