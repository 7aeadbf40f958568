"""CRC-16/IBM-3740 for the device link: the check that decides whether a frame is trusted.

Variant (RevEng catalogue name CRC-16/IBM-3740, aliases CRC-16/CCITT-FALSE and
CRC-16/AUTOSAR): width=16 poly=0x1021 init=0xFFFF refin=false refout=false xorout=0x0000
check=0x29B1 residue=0x0000.

Why this variant: it is the one a microcontroller most likely has in ROM or in a CRC
peripheral (STM32 CRC unit, AUTOSAR Crc_CalculateCRC16), it is non-reflected so the
table-driven loop is eight lines of C, and its zero residue lets a receiver check a frame
with one pass over payload+CRC instead of slicing the CRC off first.

Why `binascii.crc_hqx`: it computes exactly this polynomial, non-reflected, with the init
we pass (0xFFFF), in C. Measured on this machine (2 cores, Python 3.11, 16 / 64 / 256-byte
inputs, best of 5 x 2000 calls):

    binascii.crc_hqx (stdlib C)          0.06 /   0.17 /    0.61 us
    table-driven pure Python (below)     1.0  /   3.7  /   15    us
    `crc` 8.0 Calculator, optimized=True  9.7  /  38    /  153    us
    `crc` 8.0 Calculator, bit-by-bit     64    / 253    / 1034    us

The maintained `crc` package is correct (the tests use it as an independent oracle) but
two orders of magnitude slower than the stdlib; `crcmod` is not installed and would only
tie with crc_hqx. So the hot path uses `crc_hqx`; `crc16_reference` is the table-driven
form the SPEC describes for firmware, kept here so tests prove the two agree.
"""

from __future__ import annotations

from binascii import crc_hqx

NAME = "CRC-16/IBM-3740"
WIDTH = 16
POLY = 0x1021
INIT = 0xFFFF
REFIN = False
REFOUT = False
XOROUT = 0x0000
CHECK = 0x29B1  # CRC of b"123456789"
RESIDUE = 0x0000  # CRC of (data + big-endian CRC of data)
SIZE = 2  # bytes on the wire, big-endian


def crc16(data: bytes | bytearray | memoryview) -> int:
    """CRC-16/IBM-3740 of ``data``; the function every encoder and decoder calls."""
    return crc_hqx(data, INIT)


def crc16_append(data: bytes) -> bytes:
    """``data`` followed by its CRC, high byte first (so the whole has residue 0)."""
    return data + crc_hqx(data, INIT).to_bytes(SIZE, "big")


def crc16_ok(data_with_crc: bytes | bytearray | memoryview) -> bool:
    """True when the trailing two bytes are the CRC of the rest (residue check, one pass)."""
    return crc_hqx(data_with_crc, INIT) == RESIDUE


def _make_table() -> tuple[int, ...]:
    """The 256-entry MSB-first table a firmware would keep in flash."""
    table = []
    for byte in range(256):
        reg = byte << 8
        for _ in range(8):
            reg = ((reg << 1) ^ POLY) if reg & 0x8000 else (reg << 1)
        table.append(reg & 0xFFFF)
    return tuple(table)


TABLE: tuple[int, ...] = _make_table()


def crc16_reference(data: bytes | bytearray | memoryview, reg: int = INIT) -> int:
    """Table-driven CRC, written the way the SPEC tells firmware to do it (oracle for tests)."""
    table = TABLE
    for byte in data:
        reg = ((reg << 8) & 0xFF00) ^ table[(reg >> 8) ^ byte]
    return reg ^ XOROUT
