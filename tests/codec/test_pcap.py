"""pcap/pcapng reading (both byte orders, us/ns, if_tsresol, SPB, sections) and the
deterministic nanosecond pcap writer. Files are built here byte by byte, and tshark's
editcap (a peer: skips without it, fails in CI) converts a real capture to pcapng for a
cross-check."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import CaptureError, PcapWriter, read_capture
from tests.support.peers import capture_files, require_binary

FRAMES = [bytes(range(60)), b"\x01" * 14, bytes(1500)]


def _pcap(e: str, magic: int, frac_scale: int, records: list[tuple[int, bytes]]) -> bytes:
    out = struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    for ts_ns, data in records:
        sec, rem = divmod(ts_ns, 1_000_000_000)
        out += struct.pack(e + "IIII", sec, rem // frac_scale, len(data), len(data)) + data
    return out


@pytest.mark.parametrize("e", ["<", ">"])
@pytest.mark.parametrize(("magic", "scale"), [(0xA1B2C3D4, 1000), (0xA1B23C4D, 1)])
def test_classic_pcap_both_orders_and_resolutions(
    tmp_path: Path, e: str, magic: int, scale: int
) -> None:
    recs = [(1_700_000_000_123_456_789 + i * 1_000, f) for i, f in enumerate(FRAMES)]
    path = tmp_path / "x.bin"  # the name says nothing: detection is by magic
    path.write_bytes(_pcap(e, magic, scale, recs))
    got = list(read_capture(path))
    assert [c.number for c in got] == [1, 2, 3]
    assert [c.data for c in got] == FRAMES
    assert [c.linktype for c in got] == [1, 1, 1]
    assert [c.ts_ns for c in got] == [t // scale * scale for t, _ in recs]


def _block(e: str, btype: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    n = len(body) + 12
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def _opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def _pcapng(
    e: str, tsresol: int | None, frames: list[tuple[int, bytes]], spb: bytes = b""
) -> bytes:
    shb = _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = (_opt(e, 9, bytes((tsresol,))) if tsresol is not None else b"") + _opt(e, 0, b"")
    idb = _block(e, 1, struct.pack(e + "HHI", 1, 0, 65535) + opts)
    out = shb + idb
    for ts, data in frames:
        out += _block(
            e,
            6,
            struct.pack(e + "IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data)) + data,
        )
    out += _block(e, 4, b"\x00\x00\x00\x00")  # a name resolution block, skipped
    if spb:
        out += _block(e, 3, struct.pack(e + "I", len(spb)) + spb)
    return out


@pytest.mark.parametrize("e", ["<", ">"])
def test_pcapng_epb_spb_and_resolutions(tmp_path: Path, e: str) -> None:
    path = tmp_path / "a.pcap"  # wrong extension on purpose
    path.write_bytes(_pcapng(e, None, [(1_700_000_000_000_001, FRAMES[0])], spb=FRAMES[1]))
    got = list(read_capture(path))
    assert got[0].ts_ns == 1_700_000_000_000_001_000  # default microseconds
    assert [c.data for c in got] == FRAMES[:2] and [c.number for c in got] == [1, 2]
    path.write_bytes(_pcapng(e, 9, [(1_700_000_000_123_456_789, FRAMES[2])]))
    assert next(iter(read_capture(path))).ts_ns == 1_700_000_000_123_456_789
    path.write_bytes(_pcapng(e, 0x80 | 10, [(3 * 1024 + 512, FRAMES[0])]))  # 2^-10 s units
    assert next(iter(read_capture(path))).ts_ns == 3_500_000_000
    # two sections, the second with the other byte order
    other = ">" if e == "<" else "<"
    path.write_bytes(_pcapng(e, 9, [(1, FRAMES[0])]) + _pcapng(other, 6, [(2, FRAMES[1])]))
    got = list(read_capture(path))
    assert [(c.number, c.ts_ns, c.data) for c in got] == [(1, 1, FRAMES[0]), (2, 2000, FRAMES[1])]


def test_errors_name_path_offset_and_reason(tmp_path: Path) -> None:
    path = tmp_path / "bad"
    with pytest.raises(CaptureError, match="cannot open"):
        list(read_capture(tmp_path / "missing"))
    path.write_bytes(b"GIF89a")
    with pytest.raises(CaptureError, match="neither pcap nor pcapng") as err:
        list(read_capture(path))
    assert err.value.offset == 0 and err.value.path == str(path)
    good = _pcap("<", 0xA1B2C3D4, 1000, [(0, FRAMES[0]), (0, FRAMES[1])])
    path.write_bytes(good[:-3])
    frames = []
    with pytest.raises(CaptureError, match="cut short") as err:
        for c in read_capture(path):
            frames.append(c)
    assert len(frames) == 1 and err.value.offset == 24 + 16 + 60
    ng = bytearray(_pcapng("<", 9, [(1, FRAMES[0])]))
    ng[-4:] = b"\x00\x00\x00\x00"  # trailing block length lies
    path.write_bytes(bytes(ng))
    with pytest.raises(CaptureError, match="trailing length"):
        list(read_capture(path))
    ng = bytearray(_pcapng("<", 9, [(1, FRAMES[0])]))
    ng[4:8] = (13).to_bytes(4, "little")
    path.write_bytes(bytes(ng))
    with pytest.raises(CaptureError, match="block length 13"):
        list(read_capture(path))


def test_writer_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    recs = [(1_700_000_000_000_000_007 + i, f) for i, f in enumerate(FRAMES)]
    for name in ("one.pcap", "two.pcap"):
        with PcapWriter(tmp_path / name) as w:
            for ts, data in recs:
                w.write(data, ts)
    one, two = (tmp_path / "one.pcap").read_bytes(), (tmp_path / "two.pcap").read_bytes()
    assert one == two and one[:4] == bytes.fromhex("4d3cb2a1")
    got = list(read_capture(tmp_path / "one.pcap"))
    assert [(c.ts_ns, c.data) for c in got] == recs
    w = PcapWriter(tmp_path / "x.pcap")
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x", 0)


def test_real_capture_read_by_our_reader_and_editcap_pcapng(tmp_path: Path) -> None:
    src = next(p for p in capture_files() if p.name == "brogoose_goose_orig.pcap")
    frames = list(read_capture(src))
    assert len(frames) == 16
    editcap = require_binary("editcap", "wireshark-common")
    ng = tmp_path / "conv.pcap"
    subprocess.run([editcap, "-F", "pcapng", str(src), str(ng)], check=True, timeout=60)
    assert ng.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    assert [(c.ts_ns, c.data) for c in read_capture(ng)] == [(c.ts_ns, c.data) for c in frames]
