"""`goosectl capture` on veth pairs (root): a line-rate burst lands in the pcapng byte for
byte, VLAN tags the kernel stripped put back, the kernel's drop count in the file; tshark
(the independent reader) reads it. The file's statistics blocks are read here by a small
parser of their own, not by the product's writer."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import read_capture
from tests.ethernet.burst import MmsgSender, capture_frames
from tests.support.lines import Lines
from tests.support.peers import CAPTURES

pytestmark = pytest.mark.root

ABB = capture_frames()  # 451 frames, priority-tagged (VID 0, PCP 4)
DEMO = capture_frames(CAPTURES / "iti_GOOSE_DEMO.pcap")[0]  # VID 10
GE = capture_frames(CAPTURES / "iti_GOOSE.pcap")  # untagged


def burst_frames() -> list[bytes]:
    """4,510 frames: the ABB capture ten times, every 50th a VID 10 frame, every 50th
    (offset 25) an untagged one: all three shapes of tag in one burst."""
    frames = ABB * 10
    for i in range(0, len(frames) - 25, 50):
        frames[i] = DEMO
        frames[i + 25] = GE[(i // 50) % len(GE)]
    return frames


class Capturer:
    """`goosectl capture` in a namespace; `finish` waits for it (or stops it) and parses
    its closing line."""

    def __init__(self, ns, *args: str) -> None:
        self.proc = ns.popen(
            [sys.executable, "-u", "-m", "goosectl", "capture", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out = Lines(self.proc.stdout)
        self.ready = self.out.wait_for_json(lambda x: x.get("event") == "capturing", "capturing")

    def finish(self, stop: bool = False) -> dict:
        if stop:
            self.proc.terminate()
        self.proc.wait(timeout=120)
        err = self.proc.stderr.read()
        assert self.proc.returncode == 0, err
        self.stderr = err
        (line,) = [x for x in self.out.all() if '"event": "capture"' in x]
        return json.loads(line)


def isb_counters(path: Path) -> list[tuple[int, int, int]]:
    """(interface, isb_ifrecv, isb_ifdrop) of every Interface Statistics Block."""
    data = path.read_bytes()
    off, out = 0, []
    while off < len(data):
        btype, blen = struct.unpack_from("<II", data, off)
        if btype == 5:
            (iface,) = struct.unpack_from("<I", data, off + 8)
            opt = off + 20
            got = {}
            while opt < off + blen - 4:
                code, length = struct.unpack_from("<HH", data, opt)
                if code == 0:
                    break
                got[code] = data[opt + 4 : opt + 4 + length]
                opt += 4 + length + (-length % 4)
            recv = struct.unpack("<Q", got[4])[0]
            drop = struct.unpack("<Q", got[5])[0]
            out.append((iface, recv, drop))
        off += blen
    return out


def tshark_fields(path: Path, *fields: str) -> list[list[str]]:
    args = ["tshark", "-r", str(path), "-T", "fields"]
    for f in fields:
        args += ["-e", f]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    assert "appears to be damaged" not in res.stderr, res.stderr
    return [line.split("\t") for line in res.stdout.splitlines()]


def test_a_line_rate_burst_is_recorded_byte_for_byte(wire, tmp_path) -> None:
    sent = burst_frames()
    assert len(sent) == 4_510
    out = tmp_path / "burst.pcapng"
    cap = Capturer(wire.right, "--iface", wire.veth.b, "-w", str(out), "-c", str(len(sent)))
    assert cap.ready["rx"] == {"A": "tpacket_v3"}
    MmsgSender(wire.open("a", timestamps=False), sent).send_all()
    summary = cap.finish()
    got = [f.data for f in read_capture(out)]
    assert len(got) == len(sent)
    assert got == sent  # tags included: VID 0 and VID 10 restored, untagged left alone
    side = summary["sides"]["A"]
    assert summary["frames"] == 4_510 and side["drops"] == 0
    assert isb_counters(out) == [(0, side["kernel_packets"], side["drops"])]
    # tshark reads it: every frame GOOSE, the tags where they were sent
    rows = tshark_fields(out, "frame.interface_name", "vlan.id", "goose.appid")
    assert len(rows) == 4_510
    assert {r[0] for r in rows} == {wire.veth.b}
    assert [r[1] for r in rows[:2]] == ["10", "0"] and rows[25][1] == ""
    assert all(r[2] for r in rows)
    assert "4510 packets captured" in cap.stderr


def test_the_kernels_drops_are_in_the_file(wire, tmp_path) -> None:
    """A ring far too small for the burst: the kernel drops, and the file says how many,
    the same count the kernel gave; written + dropped = sent."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("rx_ring:\n  frames: 20\n  block_kib: 4\n")
    out = tmp_path / "drops.pcapng"
    cap = Capturer(wire.right, "--iface", wire.veth.b, "-w", str(out), "--config", str(cfg))
    MmsgSender(wire.open("a", timestamps=False), ABB * 10).send_all()
    wait_quiet(out)
    summary = cap.finish(stop=True)
    side = summary["sides"]["A"]
    written = sum(1 for _ in read_capture(out))
    assert side["drops"] > 0
    assert isb_counters(out) == [(0, side["kernel_packets"], side["drops"])]
    assert written == summary["frames"]
    assert written + side["drops"] == side["kernel_packets"] == 4_510
    assert f"{side['drops']} packets dropped by kernel" in cap.stderr


def wait_quiet(path: Path, quiet_s: float = 1.0, timeout: float = 60.0) -> None:
    """Until the file stops growing for ``quiet_s`` (the ring is drained); the deadline
    only bounds a failing test."""
    import time

    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        size = path.stat().st_size if path.exists() else 0
        if size != last:
            last, since = size, time.monotonic()
        elif time.monotonic() - since > quiet_s:
            return
        time.sleep(0.05)


def test_a_and_b_go_into_one_file_as_two_interfaces(netlab, tmp_path) -> None:
    left, right = netlab.namespace(), netlab.namespace()
    netlab.veth(left, right, a="ta", b="ra")
    netlab.veth(left, right, a="tb", b="rb")
    out = tmp_path / "ab.pcapng"
    cap = Capturer(right, "--iface", "ra", "--iface-b", "rb", "-w", str(out), "-c", "20")
    from goosectl.protocols.ethernet.rawsock import RawSocket

    with left.entered():
        ta, tb = RawSocket("ta", timestamps=False), RawSocket("tb", timestamps=False)
    try:
        for f in ABB[:10]:
            ta.send(f)
        for f in ABB[10:20]:
            tb.send(f)
        summary = cap.finish()
    finally:
        ta.close()
        tb.close()
    assert summary["frames"] == 20
    rows = tshark_fields(out, "frame.interface_id", "frame.interface_name")
    assert sorted(rows) == [["0", "ra"]] * 10 + [["1", "rb"]] * 10
    assert sorted(f.data for f in read_capture(out)) == sorted(ABB[:20])
    assert [c[0] for c in isb_counters(out)] == [0, 1]
    # the comment naming the program that wrote it
    info = subprocess.run(["capinfos", str(out)], capture_output=True, text=True, timeout=60)
    assert "goosectl" in info.stdout


def test_rotation_keeps_the_newest_files(wire, tmp_path) -> None:
    out = tmp_path / "ring.pcapng"
    args = ["--iface", wire.veth.b, "-w", str(out), "-c", "451", "--rotate-mb", "0.02"]
    cap = Capturer(wire.right, *args, "--keep", "2")
    MmsgSender(wire.open("a", timestamps=False), ABB).send_all()
    summary = cap.finish()
    files = sorted(tmp_path.glob("ring_*.pcapng"))
    assert [str(f) for f in files] == summary["files"]
    assert len(files) == 2 and files[-1].name != "ring_00001.pcapng"
    # each kept file is a whole pcapng tshark reads, ending with its statistics
    for f in files:
        assert tshark_fields(f, "frame.number")
        assert len(isb_counters(f)) == 1
    # what is kept is the tail of what was sent
    kept = [x.data for f in files for x in read_capture(f)]
    assert kept == ABB[-len(kept) :]


def test_without_a_ring_the_tag_comes_back_from_auxdata(wire, tmp_path) -> None:
    """`rx_ring: {version: 0}`: frames through recvmsg, the stripped tag read from
    PACKET_AUXDATA and put back all the same (a burst small enough for the socket
    buffer, sent one frame at a time)."""
    cfg = tmp_path / "noring.yaml"
    cfg.write_text("rx_ring:\n  version: 0\n")
    out = tmp_path / "aux.pcapng"
    sent = [DEMO, *GE, *ABB[:20]]
    cap = Capturer(wire.right, "--iface", wire.veth.b, "-w", str(out), "-c", str(len(sent)),
                   "--config", str(cfg))  # fmt: skip
    assert cap.ready["rx"] == {"A": "recvmsg"}
    sock = wire.open("a", timestamps=False)
    for f in sent:
        sock.send(f)
    summary = cap.finish()
    assert summary["frames"] == len(sent)
    assert [f.data for f in read_capture(out)] == sent
