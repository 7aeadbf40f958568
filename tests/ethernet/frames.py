"""Test frames and a reader that waits for them without asserting any time."""

from __future__ import annotations

import selectors

from goosectl.protocols.ethernet.rawsock import RawSocket, RxFrame

GROUP_A = bytes.fromhex("010ccd010001")
GROUP_B = bytes.fromhex("010ccd010002")
SRC = bytes.fromhex("02aabbccdd01")
GOOSE = 0x88B8


def frame(dst: bytes, label: bytes, *, ethertype: int = GOOSE, size: int = 80) -> bytes:
    """An Ethernet frame whose payload starts with ``label`` so a test can tell frames apart."""
    header = dst + SRC + ethertype.to_bytes(2, "big") + b"\x00\x01\x00\x00\x00\x00\x00\x00"
    body = label + bytes(max(0, size - len(header) - len(label)))
    return header + body


def read_until(sock: RawSocket, last: bytes, *, timeout: float = 5.0) -> list[RxFrame]:
    """Read frames until one containing ``last`` arrives, then drain stragglers briefly.

    The timeout only bounds a failing test; nothing here measures or asserts time.
    """
    got: list[RxFrame] = []
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        while not any(last in rx.frame for rx in got):
            if not sel.select(timeout):
                raise AssertionError(f"no frame containing {last!r} arrived; got {got!r}")
            got += sock.recv_batch()
        while sel.select(0.05):
            got += sock.recv_batch()
    return got


def labels(frames: list[RxFrame], candidates: list[bytes]) -> list[bytes]:
    """Which candidate labels appear, in arrival order."""
    return [c for rx in frames for c in candidates if c in rx.frame]
