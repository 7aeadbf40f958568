"""The rewrites of `replay --iface` (pure, no root): numbers continued per stream and
across loops, ``t`` moved with its quality kept, the source MAC, a bad frame passed on."""

from __future__ import annotations

from goosectl.controller.replay.wire_rewrite import WireRewrite, next_count
from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.goose import decode_frame
from tests.support.peers import CAPTURES

GE = [f.data for f in read_capture(CAPTURES / "iti_GOOSE.pcap")]


def numbers(frames: list[bytes]) -> list[tuple[int, int]]:
    return [(decode_frame(f).st_num, decode_frame(f).sq_num) for f in frames]


def test_renumbering_never_goes_back_across_an_sqnum_reset_and_loops() -> None:
    rw = WireRewrite(renumber=True)
    out = []
    for _ in range(2):
        rw.new_loop()
        out += [rw.apply(f) for f in GE]
    got = numbers(out)
    # the capture: stNum 1 throughout, sqNum 10, 11, 12, then reset to 1..5
    assert got[:8] == [(1, i) for i in range(8)]
    assert got[8:] == [(2, i) for i in range(8)]
    assert rw.rewritten == 16 and rw.not_rewritten == 0


def test_a_live_stream_is_continued() -> None:
    rw = WireRewrite(renumber=True)
    h = decode_frame(GE[0])
    rw.continue_from(h.gocb_ref, h.appid, 0xFFFFFFFF, 3)
    assert numbers([rw.apply(GE[0]), rw.apply(GE[1])]) == [(1, 0), (1, 1)]  # wrapped to 1
    assert next_count(0xFFFFFFFF) == 1 and next_count(7) == 8


def test_time_moved_quality_kept_and_source_rewritten() -> None:
    src = bytes.fromhex("020000000001")
    before = decode_frame(GE[0])
    rw = WireRewrite(src=src, time_shift_ns=10**18)
    after = decode_frame(rw.apply(GE[0]))
    assert after.src == src
    assert after.t.quality == before.t.quality
    assert abs(after.t.to_ns() - before.t.to_ns() - 10**18) < 100
    assert (after.st_num, after.sq_num, after.all_data) == (
        before.st_num, before.sq_num, before.all_data)  # fmt: skip


def test_a_frame_that_cannot_be_rewritten_is_sent_as_captured_and_counted() -> None:
    rw = WireRewrite(time_shift_ns=1)
    broken = GE[0][:40]
    assert rw.apply(broken) == broken
    assert rw.not_rewritten == 1 and rw.last_error
    other = bytes(12) + b"\x08\x00" + bytes(46)  # not GOOSE: untouched
    assert rw.apply(other) == other
