"""Sans-IO byte-stream side of the link: `frame(msg)` out, `StreamDecoder.feed(bytes)` in.

The decoder is what a read loop calls with whatever `read()` returned: half a frame,
three frames, a burst of line noise. It returns the messages and the errors, in order,
as values, and keeps a count of each error kind. It holds at most MAX_ENCODED bytes of an
unfinished frame: a frame that grows past that is reported once as TOO_LONG and its
remaining bytes are skipped up to the next 0x00, where decoding starts afresh. So
arbitrary input can neither crash it nor make it grow.
"""

from __future__ import annotations

from collections import Counter

from cobs import cobs as _cobs

from goosectl.protocols.serial.errors import ErrorKind, FrameTooLong, LinkProtocolError
from goosectl.protocols.serial.framing import DELIMITER, MAX_ENCODED, cobs_decode
from goosectl.protocols.serial.messages import Kind, Message, decode_payload, encode_payload

Result = Message | LinkProtocolError


def frame(msg: Message) -> bytes:
    """The exact bytes to write for ``msg``: COBS(header + body + CRC) + 0x00."""
    encoded: bytes = _cobs.encode(encode_payload(msg))  # the C extension has no type information
    return encoded + DELIMITER


def decode_frame(encoded: bytes, accept: frozenset[Kind] | None = None) -> Message:
    """Decode one frame without its delimiter; raises `LinkProtocolError`."""
    if len(encoded) > MAX_ENCODED:
        raise FrameTooLong(
            f"frame is {len(encoded)} bytes before its delimiter, the maximum is {MAX_ENCODED}",
            offset=MAX_ENCODED,
            frame=encoded,
        )
    return decode_payload(cobs_decode(encoded), accept)


class StreamDecoder:
    """Incremental decoder for one direction of the link.

    ``accept``: the kinds this side may receive (`SENT_BY_DEVICE` on the controller,
    `SENT_BY_CONTROLLER` on the device); others are reported as WRONG_DIRECTION.
    """

    __slots__ = ("_buf", "_discarding", "_pos", "_start", "accept", "errors", "messages")

    def __init__(self, accept: frozenset[Kind] | None = None) -> None:
        self.accept = accept
        self._buf = bytearray()
        self._discarding = False  # inside an over-long frame: skip to the next delimiter
        self._pos = 0  # stream offset of the next byte fed
        self._start = 0  # stream offset of the first byte in _buf
        self.errors: Counter[ErrorKind] = Counter()
        self.messages = 0

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished frame (never more than MAX_ENCODED)."""
        return len(self._buf)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def feed(self, data: bytes | bytearray | memoryview) -> list[Result]:
        """Consume ``data``; return every message and error it completed, in stream order."""
        out: list[Result] = []
        if not isinstance(data, bytes):
            if isinstance(data, str):
                raise TypeError("StreamDecoder.feed() takes the bytes read from the port, not str")
            data = bytes(data)
        base = self._pos
        self._pos += len(data)
        start, n = 0, len(data)
        while start < n:
            end = data.find(0, start)
            if end < 0:
                self._hold(data, start, n, base, out)
                break
            if self._discarding:
                self._discarding = False
            elif self._buf:
                self._buf += data[start:end]
                chunk, at = bytes(self._buf), self._start
                self._buf.clear()
                self._decode(chunk, at, out)
            elif end > start:
                self._decode(data[start:end], base + start, out)
            start = end + 1
        return out

    def _hold(self, data: bytes, start: int, n: int, base: int, out: list[Result]) -> None:
        """Keep the tail of ``data`` (an unfinished frame) unless it breaks the size bound."""
        if self._discarding:
            return
        if not self._buf:
            self._start = base + start
        if len(self._buf) + (n - start) > MAX_ENCODED:
            self._buf.clear()
            self._discarding = True
            self._report(
                FrameTooLong(
                    f"no delimiter within {MAX_ENCODED} bytes; skipping to the next 0x00",
                    offset=MAX_ENCODED,
                    frame=data[start : start + 64],
                ),
                self._start,
                out,
            )
            return
        self._buf += data[start:n]

    def _decode(self, chunk: bytes, at: int, out: list[Result]) -> None:
        try:
            msg = decode_frame(chunk, self.accept)
        except LinkProtocolError as err:
            self._report(err, at, out)
        else:
            self.messages += 1
            out.append(msg)

    def _report(self, err: LinkProtocolError, at: int, out: list[Result]) -> None:
        err.stream_offset = at
        self.errors[err.kind] += 1
        out.append(err)

    def reset(self) -> None:
        """Forget a partial frame (e.g. after the port was reopened); counters are kept."""
        self._buf.clear()
        self._discarding = False
