"""Real byte pipes: a pty pair with pyserial on the slave end, loop:// and socket://."""

from __future__ import annotations

import os
import select
import socket
import threading

import pytest

from goosectl.protocols.serial import messages as m
from goosectl.protocols.serial.port import PortError, PtyPair, open_pty_pair, open_serial
from goosectl.protocols.serial.stream import StreamDecoder, frame

GUARD_S = 5.0  # only a hang guard; no test asserts how long anything took


def read_fd_exactly(fd: int, n: int) -> bytes:
    got = b""
    while len(got) < n:
        ready, _, _ = select.select([fd], [], [], GUARD_S)
        assert ready, f"pty produced {len(got)} of {n} bytes"
        got += os.read(fd, n - len(got))
    return got


def read_messages(read, decoder: StreamDecoder, count: int) -> list:
    out: list = []
    for _ in range(1000):
        if len(out) >= count:
            break
        out += decoder.feed(read())
    return out


@pytest.fixture
def pty() -> PtyPair:
    pair = open_pty_pair()
    try:
        yield pair
    finally:
        pair.close()


def test_pty_is_raw_every_byte_value_passes(pty: PtyPair) -> None:
    data = bytes(range(256)) * 4  # includes 0x03 (^C), 0x0D (CR), 0x11/0x13 (XON/XOFF)
    os.write(pty.master_fd, data)
    assert read_fd_exactly(pty.slave_fd, len(data)) == data
    os.write(pty.slave_fd, data[::-1])
    assert read_fd_exactly(pty.master_fd, len(data)) == data[::-1]


def test_command_and_response_over_a_real_pty_with_pyserial(pty: PtyPair) -> None:
    """Controller on the master fd, device on the slave through pyserial, both decoding."""
    ser = open_serial(pty.slave_path, timeout=0.05)
    try:
        device_rx = StreamDecoder(m.SENT_BY_CONTROLLER)
        controller_rx = StreamDecoder(m.SENT_BY_DEVICE)
        # bytes that a cooked tty would mangle: CR, XON, XOFF, ^C, and zeros for COBS
        commands = [
            m.SetOutput(0x0D11, 0x1303, 0x0300),
            m.Trip(0x0D0D),
            m.EventAck(0x1100, 0x0D00),
        ]
        os.write(pty.master_fd, b"".join(frame(c) for c in commands))
        received = read_messages(lambda: ser.read(64), device_rx, len(commands))
        assert received == commands

        answers = [
            m.Ack(
                c.seq, m.spec_for(c).code, m.AckResult.DONE, m.Dbpos.OFF, 0x0203, 0x11, 0x13, 9, 0
            )
            for c in commands[:2]
        ]
        answers.append(m.PowerUp(0x0D0A, 9, m.ResetCause.COMMANDED))
        ser.write(b"".join(frame(a) for a in answers))
        ser.flush()
        got = read_messages(lambda: read_fd_exactly(pty.master_fd, 1), controller_rx, len(answers))
        assert got == answers
        assert device_rx.error_count == controller_rx.error_count == 0
    finally:
        ser.close()


def test_garbage_on_a_pty_is_counted_and_the_link_continues(pty: PtyPair) -> None:
    ser = open_serial(pty.slave_path, timeout=0.05)
    try:
        dec = StreamDecoder(m.SENT_BY_CONTROLLER)
        noise = b"\xde\xad\xbe\xef\x00" + b"\x7f" * 200 + b"\x00"
        os.write(pty.master_fd, noise + frame(m.Ping(1)))
        out = read_messages(lambda: ser.read(64), dec, 3)
        assert out[-1] == m.Ping(1)
        assert dec.error_count == 2 and dec.messages == 1
    finally:
        ser.close()


def test_loop_url_round_trip() -> None:
    ser = open_serial("loop://", timeout=0.05)
    try:
        msgs = [m.ReadStatus(7), m.Configure(8, m.ConfigParam.OPEN_TIME_MS, 30)]
        ser.write(b"".join(frame(x) for x in msgs))
        dec = StreamDecoder(m.SENT_BY_CONTROLLER)
        assert read_messages(lambda: ser.read(64), dec, 2) == msgs
    finally:
        ser.close()


def test_socket_url_round_trip_on_loopback() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def echo_once() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    t = threading.Thread(target=echo_once, daemon=True)
    t.start()
    ser = open_serial(f"socket://127.0.0.1:{port}", timeout=0.05)
    try:
        ev = m.Alarm(3, m.AlarmId.GAS_PRESSURE_LOW, True)
        ser.write(frame(ev))
        dec = StreamDecoder(m.SENT_BY_DEVICE)
        assert read_messages(lambda: ser.read(64), dec, 1) == [ev]
    finally:
        ser.close()
        t.join(GUARD_S)
        server.close()


@pytest.mark.parametrize("url", ["/nonexistent/ttyGOOSE0", "bogus://nowhere", ""])
def test_open_failure_is_a_port_error_naming_the_port(url: str) -> None:
    with pytest.raises(PortError) as info:
        open_serial(url)
    assert (repr(url) in str(info.value)) or ("no serial port given" in str(info.value))


def test_pty_pair_close_is_idempotent_and_releases_fds() -> None:
    with open_pty_pair() as pair:
        fds = (pair.master_fd, pair.slave_fd)
        assert os.path.exists(pair.slave_path)
    pair.close()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
