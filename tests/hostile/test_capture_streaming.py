"""A large capture was read whole into memory before the first frame.
The pcap and pcapng readers now stream records from the file; `decode` and `replay`
consume them as they come. Proven two ways: a FIFO whose writer holds the rest of the
capture back until the reader has shown the first frame (a whole-file read never would),
and the memory a 48 MB capture costs to read (tracemalloc: allocations, not timing).
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import tracemalloc
from pathlib import Path

import pytest

from goosectl.controller.cli import main as goosectl
from goosectl.controller.replay.goose_replay import capture_frames
from goosectl.protocols.ethernet.pcap import PcapWriter, read_capture
from goosectl.protocols.goose import GooseFrame, OctetString, encode_frame
from tests.hostile.frames import BASE, pcapng

S = 1_000_000_000
T0 = 1_700_000_000 * S
#: bounds a failing test only (the old reader waited for EOF, the writer waits for it)
DEADLINE_S = 30


def _frame(sq: int, pad: int = 0) -> bytes:
    kw = {k: getattr(BASE, k) for k in BASE.__dataclass_fields__}
    data = (*BASE.all_data, OctetString(bytes(pad))) if pad else BASE.all_data
    return encode_frame(GooseFrame(**{**kw, "sq_num": sq, "all_data": data}))


def _pcap_bytes(frames: list[bytes]) -> bytes:
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262_144, 1)
    for i, data in enumerate(frames):
        sec, ns = divmod(T0 + i * S, S)
        out += struct.pack("<IIII", sec, ns, len(data), len(data)) + data
    return out


class FifoWriter(threading.Thread):
    """Writes `head` into a FIFO, waits until `first_seen` (or the deadline), then the
    rest; records whether the reader got there before the rest existed."""

    def __init__(self, path: Path, head: bytes, rest: bytes) -> None:
        super().__init__(daemon=True)
        self.path, self.head, self.rest = path, head, rest
        self.first_seen = threading.Event()
        self.streamed: bool | None = None

    def run(self) -> None:
        with open(self.path, "wb", buffering=0) as fh:
            fh.write(self.head)
            self.streamed = self.first_seen.wait(DEADLINE_S)
            fh.write(self.rest)


def _fifo(tmp_path: Path, blob: bytes, cut: int) -> FifoWriter:
    path = tmp_path / "live.pcap"
    os.mkfifo(path)
    writer = FifoWriter(path, blob[:cut], blob[cut:])
    writer.start()
    return writer


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_the_reader_yields_a_frame_before_the_file_is_complete(tmp_path, fmt):
    frames = [_frame(i) for i in range(5)]
    if fmt == "pcap":
        blob, cut = _pcap_bytes(frames), 24 + 16 + len(frames[0])
    else:
        blob = pcapng([(T0 + i * S, f) for i, f in enumerate(frames)])
        # everything up to the first EPB's end: an EPB is 32 octets plus the padded frame
        cut = len(blob) - sum(32 + len(f) + (-len(f) % 4) for f in frames[1:])
    writer = _fifo(tmp_path, blob, cut)
    got = []
    for cap in read_capture(writer.path):
        got.append(cap.data)
        writer.first_seen.set()
    writer.join(DEADLINE_S)
    assert writer.streamed is True
    assert got == frames


def test_decode_prints_the_first_frame_before_the_capture_ends(tmp_path):
    frames = [_frame(i) for i in range(5)]
    blob = _pcap_bytes(frames)
    writer = _fifo(tmp_path, blob, 24 + 16 + len(frames[0]))

    class Out:
        def __init__(self) -> None:
            self.lines: list[str] = []

        def write(self, text: str) -> None:
            self.lines.append(text)
            writer.first_seen.set()

        def flush(self) -> None:
            pass

    out = Out()
    with contextlib.redirect_stdout(out):  # type: ignore[type-var]
        assert goosectl(["decode", str(writer.path)]) == 0
    writer.join(DEADLINE_S)
    assert writer.streamed is True
    assert len(out.lines) == 5 and "sqNum=0 " in out.lines[0]


def test_replay_consumes_the_capture_as_it_comes(tmp_path):
    frames = [_frame(i) for i in range(5)]
    writer = _fifo(tmp_path, _pcap_bytes(frames), 24 + 16 + len(frames[0]))
    numbers = []
    for number, _ts, _data in capture_frames(writer.path):
        numbers.append(number)
        writer.first_seen.set()
    writer.join(DEADLINE_S)
    assert writer.streamed is True and numbers == [1, 2, 3, 4, 5]


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory) -> Path:
    """48 MB: 32,000 frames of 1.5 KB."""
    path = tmp_path_factory.mktemp("big") / "big.pcap"
    frame = _frame(1, pad=1400)
    with PcapWriter(path) as w:
        for i in range(32_000):
            w.write(frame, T0 + i * 1_000_000)
    assert path.stat().st_size > 48_000_000
    return path


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_a_large_capture_costs_one_record_of_memory(big_capture):
    def read_all() -> None:
        n = 0
        for _ in read_capture(big_capture):
            n += 1
        assert n == 32_000

    assert _peak(read_all) < 1_000_000  # the file is 48 MB


def test_replay_frames_of_a_large_capture_stream_too(big_capture):
    def replay_frames() -> None:
        n = 0
        for _ in capture_frames(big_capture, loops=2):
            n += 1
        assert n == 64_000

    assert _peak(replay_frames) < 1_000_000
