"""Device-link codec costs, per call, beside the floor a real pty imposes.

Cases (p50/p99 per call via benchmarks.percentiles; pytest-benchmark's own table too):

- serial/crc: CRC-16/IBM-3740 over a 17-byte ACK payload: `binascii.crc_hqx` (used) vs
  our table-driven reference vs the `crc` package; why crc.py uses crc_hqx.
- serial/cobs: `cobs` C extension (used) vs the same package's pure-Python module.
- serial/codec: encode+frame and deframe+decode per message (TRIP, ACK, POSITION_CHANGE).
- serial/pty: the bare pty round trip (N bytes master->slave, echoed back) as the floor,
  and one command/response exchange through the codec over the same pty, as a ratio to it.

`measure_pty_floor` is public: the link benchmark reuses it as its baseline.
"""

from __future__ import annotations

import os
from binascii import crc_hqx

import crc as crc_lib
import pytest
from cobs.cobs import _cobs_ext, _cobs_py

from benchmarks.percentiles import Percentiles, ratio, sample_calls, summarise
from goosectl.lab.floors import pty_round_trips
from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.crc import crc16_reference
from goosectl.protocols.serial.port import open_pty_pair
from goosectl.protocols.serial.stream import StreamDecoder, decode_frame, frame

TRIP = m.Trip(0x1234)
ACK = m.Ack(0x1234, m.MsgType.TRIP, m.AckResult.STARTED, m.Dbpos.ON, 0x0203, 0x00F0, 0x0003, 17, 42)
POSITION = m.PositionChange(43, m.Dbpos.OFF, m.Dbpos.ON, m.PositionCause.TRIP_COMMAND, 31)
CASES = {"trip": TRIP, "ack": ACK, "position_change": POSITION}


def measure_pty_floor(
    nbytes: int, n: int, *, name: str | None = None, group: str = "serial/pty"
) -> Percentiles:
    """p50/p99 of one bare pty round trip (see `lab.floors`): the least any
    serial exchange on this machine can cost, so link latencies are reported as a ratio."""
    return summarise(name or f"pty_floor_{nbytes}B", group, pty_round_trips(nbytes, n))


def _record(benchmark, result: Percentiles) -> None:
    benchmark.extra_info.update(result.as_dict())


def test_crc_choice(benchmark, samples: int) -> None:
    payload = m.encode_payload(ACK)[:-2]
    assert crc_hqx(payload, 0xFFFF) == crc16_reference(payload)
    calc = crc_lib.Calculator(crc_lib.Crc16.IBM_3740, optimized=True)
    base = sample_calls(
        lambda: crc_hqx(payload, 0xFFFF), samples, name="crc_hqx", group="serial/crc"
    )
    table = sample_calls(
        lambda: crc16_reference(payload), samples // 4, name="table_python", group="serial/crc"
    )
    lib = sample_calls(
        lambda: calc.checksum(payload), samples // 40, name="crc_pkg_optimized", group="serial/crc"
    )
    ratio(table, base)
    ratio(lib, base)
    _record(benchmark, base)
    benchmark(crc_hqx, payload, 0xFFFF)


def test_cobs_choice(benchmark, samples: int) -> None:
    payload = m.encode_payload(ACK)
    enc = _cobs_ext.encode(payload)
    assert _cobs_py.encode(payload) == enc
    c_enc = sample_calls(
        lambda: _cobs_ext.encode(payload), samples, name="c_encode", group="serial/cobs"
    )
    c_dec = sample_calls(
        lambda: _cobs_ext.decode(enc), samples, name="c_decode", group="serial/cobs"
    )
    py_enc = sample_calls(
        lambda: _cobs_py.encode(payload), samples // 4, name="py_encode", group="serial/cobs"
    )
    py_dec = sample_calls(
        lambda: _cobs_py.decode(enc), samples // 4, name="py_decode", group="serial/cobs"
    )
    ratio(py_enc, c_enc)
    ratio(py_dec, c_dec)
    _record(benchmark, c_enc)
    benchmark(_cobs_ext.encode, payload)


@pytest.mark.parametrize("case", list(CASES))
def test_encode_and_frame(benchmark, samples: int, case: str) -> None:
    msg = CASES[case]
    assert decode_frame(frame(msg)[:-1]) == msg
    result = sample_calls(lambda: frame(msg), samples, name=f"frame_{case}", group="serial/codec")
    _record(benchmark, result)
    benchmark(frame, msg)


@pytest.mark.parametrize("case", list(CASES))
def test_deframe_and_decode(benchmark, samples: int, case: str) -> None:
    msg = CASES[case]
    wire = frame(msg)
    dec = StreamDecoder(m.SENT_BY_CONTROLLER if m.spec_for(msg).kind is m.Kind.COMMAND else None)
    assert dec.feed(wire) == [msg]
    result = sample_calls(
        lambda: dec.feed(wire), samples, name=f"feed_{case}", group="serial/codec"
    )
    one_shot = sample_calls(
        lambda: decode_frame(wire[:-1]), samples, name=f"decode_frame_{case}", group="serial/codec"
    )
    ratio(result, one_shot)
    assert dec.error_count == 0
    _record(benchmark, result)
    benchmark(dec.feed, wire)


def test_pty_floor_and_codec_exchange(benchmark, samples: int) -> None:
    """One TRIP -> ACK exchange through frame/feed over a pty, as a multiple of the floor."""
    n = max(500, samples // 20)
    trip_wire, ack_wire = frame(TRIP), frame(ACK)
    floor = measure_pty_floor(len(ack_wire), n)
    device_rx = StreamDecoder(m.SENT_BY_CONTROLLER)
    controller_rx = StreamDecoder(m.SENT_BY_DEVICE)
    with open_pty_pair() as pair:
        master, slave = pair.master_fd, pair.slave_fd

        def exchange() -> None:
            os.write(master, frame(TRIP))
            got: list = []
            while not got:
                got = device_rx.feed(os.read(slave, 64))
            os.write(slave, frame(ACK))
            answer: list = []
            while not answer:
                answer = controller_rx.feed(os.read(master, 64))

        exchange()
        assert device_rx.messages == controller_rx.messages == 1
        result = sample_calls(exchange, n, name="trip_ack_exchange", group="serial/pty", warmup=200)
        assert device_rx.error_count == controller_rx.error_count == 0
        ratio(result, floor)
        _record(benchmark, result)
        benchmark.extra_info["floor_p50_us"] = round(floor.p50, 3)
        benchmark.extra_info["wire_bytes"] = (len(trip_wire), len(ack_wire))
        benchmark(exchange)
