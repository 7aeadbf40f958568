"""`goosectl replay FILE --iface X` on veth pairs (root): the shared captures put back on a
wire reach `goosectl listen` as captured; with `--rewrite-time now` and `--continue-stnum`
libiec61850 (the independent subscriber) sees no rollback and times of now, where a plain
loop shows it the rollback."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import replace

import pytest

from goosectl.protocols.ethernet.pcap import read_capture
from goosectl.protocols.goose import decode_frame, encode_frame, parse_header
from tests.ethernet.burst import Listener
from tests.support.libiec61850_rx import start_primed_receiver
from tests.support.peers import CAPTURES, require_iec61850
from tests.support.procs import goosectl_argv

pytestmark = pytest.mark.root

GE = CAPTURES / "iti_GOOSE.pcap"  # one stream, 8 frames, an sqNum reset inside


def replay(ns, *args: str, timeout: float = 120) -> tuple[dict, str]:
    done = ns.run(goosectl_argv("replay", *args), timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if '"event": "replayed"' in x]
    return json.loads(line), done.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURES.glob("*.pcap")))
def test_each_shared_capture_reaches_listen_as_captured(wire, name: str) -> None:
    path = CAPTURES / name
    captured = [parse_header(f.data) for f in read_capture(path)]
    listener = Listener.start(wire.right, wire.veth.b)
    out, _ = replay(wire.left, str(path), "--iface", wire.veth.a, "--topspeed")
    assert out["frames"] == len(captured) and out["sent"] == {"A": len(captured)}
    listener.wait_quiet(len(captured))
    listener.stop()
    got = listener.frames()
    assert [(f["gocbRef"], f["stNum"], f["sqNum"]) for f in got] == [
        (h.gocb_ref, h.st_num, h.sq_num) for h in captured
    ]


def test_capture_timing_speed_and_rewritten_source(wire) -> None:
    """Own timing (the GE capture spans 28 s, at --speed 20 under 1.5 s), then the
    source MAC rewritten on every frame."""
    listener = Listener.start(wire.right, wire.veth.b)
    src = "02:00:00:00:be:ef"
    out, _ = replay(wire.left, str(GE), "--iface", wire.veth.a, "--speed", "20",
                    "--rewrite-src", src)  # fmt: skip
    listener.wait_quiet(8)
    listener.stop()
    got = listener.frames()
    assert len(got) == 8 and out["rewritten"] == 0
    assert {f["src"] for f in got} == {src}


def _sub_messages(
    wire, args: list[str], live: tuple[int, int] | None, count: int, timeout: float = 30
) -> list[dict]:
    """libiec61850 on the right end while `replay` sends GE on the left end; ``live``:
    a live stream of the same control block (stNum, sqNum) sent towards the replay's
    interface while it listens. The messages libiec61850 reported, in order."""
    require_iec61850()
    first = read_capture(GE).__next__().data
    primer_sock = wire.open("a", timestamps=False)
    rx = start_primed_receiver(wire.right, primer_sock, wire.veth.b, count,
                               dst=first[:6], timeout=timeout)  # fmt: skip
    stop = threading.Event()
    sender = None
    if live is not None:
        live_sock = wire.open("b", timestamps=False)
        frame = replace(decode_frame(first), st_num=live[0], sq_num=live[1])
        live_frame = encode_frame(frame)

        def send_live() -> None:
            while not stop.is_set():
                live_sock.send(live_frame)
                time.sleep(0.05)

        sender = threading.Thread(target=send_live, daemon=True)
        sender.start()
    try:
        out, err = replay(wire.left, str(GE), "--iface", wire.veth.a, *args)
    finally:
        stop.set()
        if sender is not None:
            sender.join()
    msgs = [json.loads(x) for x in rx.communicate(timeout=60)[0].splitlines() if x.strip()]
    assert out["not_rewritten"] == 0
    assert f"replay: {out['frames']}/{out['frames']} frames sent" in err
    return [m for m in msgs if m.get("gocbRef") == "GEDeviceF650/LLN0$GO$gcb01"]


def test_a_plain_loop_shows_libiec61850_a_rollback(wire) -> None:
    """The control: looped verbatim, the capture's numbers go back at each new pass and
    libiec61850 calls those messages invalid."""
    msgs = _sub_messages(wire, ["--pps", "200", "--loop", "3"], None, 24)
    assert len(msgs) == 24
    assert not all(m["valid"] for m in msgs)
    numbers = [(m["stNum"], m["sqNum"]) for m in msgs]
    assert any(b <= a for a, b in itertools.pairwise(numbers))


def test_continued_numbers_and_times_of_now_are_valid_for_libiec61850(wire) -> None:
    before_ms = time.time() * 1000
    args = ["--pps", "200", "--loop", "3", "--rewrite-time", "now", "--continue-stnum",
            "--continue-wait", "10"]  # fmt: skip
    # libiec61850 also reports the live frames (its socket sees what its host sends), an
    # unknown number: it collects until its timeout
    msgs = _sub_messages(wire, args, (5000, 7), 10_000, timeout=8)
    after_ms = time.time() * 1000
    replayed = [m for m in msgs if m["stNum"] > 5000]
    assert len(replayed) == 24
    assert all(m["valid"] for m in replayed)
    numbers = [(m["stNum"], m["sqNum"]) for m in replayed]
    assert numbers[0] == (5001, 0)  # the next state after the live stream's
    assert all(b > a for a, b in itertools.pairwise(numbers))
    # times of now: each pass's first t is the time it is sent, the captured spacing
    # between the t's kept (the GE capture's span 78 s)
    ts = [parse_header(f.data).t.to_ns() // 1_000_000 for f in read_capture(GE)]
    spacing = [t - ts[0] for t in ts] * 3
    now_ms = [m["t_ms"] - d for m, d in zip(replayed, spacing, strict=True)]
    assert all(before_ms - 1_000 <= t <= after_ms for t in now_ms), (now_ms, before_ms)
    first = read_capture(GE).__next__().data
    assert parse_header(first).t.quality == _t_quality_of_replayed(wire)


def _t_quality_of_replayed(wire) -> int:
    """The time quality of a frame replayed with --rewrite-time now, read by our own
    receiver on the far end (libiec61850 does not report it)."""
    sock = wire.open("b", promiscuous=True)
    replay(wire.left, str(GE), "--iface", wire.veth.a, "--topspeed", "--rewrite-time", "now")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rx = sock.recv_frame()
        if rx is not None:
            return parse_header(rx.frame).t.quality
        time.sleep(0.01)
    raise AssertionError("no replayed frame arrived")


def test_bad_pace_options_are_refused(wire) -> None:
    done = wire.left.run(goosectl_argv("replay", str(GE), "--iface", wire.veth.a, "--pps",
                                       "10", "--topspeed"), check=False)  # fmt: skip
    assert done.returncode == 2 and "--pps" in done.stderr
    done = wire.left.run(goosectl_argv("replay", str(GE), "--iface", "nosuch0"), check=False)
    assert done.returncode == 2 and "nosuch0" in done.stderr
