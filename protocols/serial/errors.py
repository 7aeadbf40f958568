"""Everything that can be wrong with bytes on the device link, as values a loop can count.

A receiver must never crash on what a wire delivers, so each failure is a
`LinkProtocolError` that says *what* (its `kind`), *where* (`offset` inside the decoded
payload, and `stream_offset` of the frame's first byte once a stream decoder saw it) and
*why* (`reason`). The stream decoder returns these as values; the one-shot decoders raise
them. `nackable` tells a device whether the frame was trustworthy enough (CRC good, header
readable) to answer with a NACK carrying `seq`, or must be dropped and left to the sender's
retry timer.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class ErrorKind(Enum):
    """Error classes, in the order a receiver checks them (see SPEC.md, "Receiving")."""

    TOO_LONG = "too_long"  # more bytes than MAX_ENCODED before a delimiter
    BAD_COBS = "bad_cobs"  # COBS code byte points past the end of the frame
    TOO_SHORT = "too_short"  # decoded payload shorter than header + CRC
    BAD_CRC = "bad_crc"  # residue over payload+CRC is not zero
    UNKNOWN_VERSION = "unknown_version"
    UNKNOWN_TYPE = "unknown_type"
    WRONG_DIRECTION = "wrong_direction"  # a valid type this side must never receive
    BAD_LENGTH = "bad_length"  # body length differs from the type's fixed layout
    BAD_VALUE = "bad_value"  # a field holds a code its enum does not define


# Kinds whose header passed the CRC: the receiver knows version, type and seq.
NACKABLE: frozenset[ErrorKind] = frozenset(
    {
        ErrorKind.UNKNOWN_VERSION,
        ErrorKind.UNKNOWN_TYPE,
        ErrorKind.WRONG_DIRECTION,
        ErrorKind.BAD_LENGTH,
        ErrorKind.BAD_VALUE,
    }
)


class LinkProtocolError(Exception):
    """A frame (or a run of bytes) that is not a valid message, and why."""

    kind: ErrorKind = ErrorKind.BAD_COBS

    def __init__(
        self,
        reason: str,
        *,
        offset: int = 0,
        seq: int | None = None,
        msg_type: int | None = None,
        version: int | None = None,
        frame: bytes = b"",
    ) -> None:
        self.reason = reason
        self.offset = offset
        self.seq = seq
        self.msg_type = msg_type
        self.version = version
        self.frame = frame[:64]  # enough to log, never a whole flood
        self.stream_offset: int | None = None
        super().__init__(reason)

    @property
    def nackable(self) -> bool:
        """True when a device may answer with a NACK for ``seq`` (header trusted)."""
        return self.kind in NACKABLE

    def __str__(self) -> str:
        where = f"payload offset {self.offset}"
        if self.stream_offset is not None:
            where = f"frame at stream byte {self.stream_offset}, {where}"
        head = ""
        if self.msg_type is not None:
            head = f" (type 0x{self.msg_type:02X}, seq {self.seq})"
        return f"{self.kind.value}: {self.reason} [{where}]{head}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # pickling keeps the keyword arguments
        return (_rebuild, (type(self), self.reason, self.__dict__))


def _rebuild(cls: type[LinkProtocolError], reason: str, state: dict[str, Any]) -> LinkProtocolError:
    err = cls.__new__(cls)
    Exception.__init__(err, reason)
    err.__dict__.update(state)
    return err


class FrameTooLong(LinkProtocolError):
    kind = ErrorKind.TOO_LONG


class BadCobs(LinkProtocolError):
    kind = ErrorKind.BAD_COBS


class FrameTooShort(LinkProtocolError):
    kind = ErrorKind.TOO_SHORT


class BadCrc(LinkProtocolError):
    kind = ErrorKind.BAD_CRC


class UnknownVersion(LinkProtocolError):
    kind = ErrorKind.UNKNOWN_VERSION


class UnknownType(LinkProtocolError):
    kind = ErrorKind.UNKNOWN_TYPE


class WrongDirection(LinkProtocolError):
    kind = ErrorKind.WRONG_DIRECTION


class BadBodyLength(LinkProtocolError):
    kind = ErrorKind.BAD_LENGTH


class BadFieldValue(LinkProtocolError):
    kind = ErrorKind.BAD_VALUE


class EncodeError(ValueError):
    """A message object that cannot be put on the wire (a programming error, not a wire one)."""
