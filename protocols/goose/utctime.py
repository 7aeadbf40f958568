"""IEC 61850 UtcTime: 32-bit seconds, 24-bit binary fraction, one quality octet.

The fraction is kept as the raw 24-bit integer (not converted to float nanoseconds), so
a decoded time re-encodes to the same 8 octets. Conversion to and from nanoseconds uses
floor one way and ceiling the other, which makes ``UtcTime.from_ns(t.to_ns()) == t`` for
every t (the 24-bit step is ~59.6 ns, coarser than 1 ns), and matches how Wireshark
prints the fraction (truncated), so our ISO strings compare equal to tshark's.
"""

from __future__ import annotations

import datetime as _dt
import struct
from dataclasses import dataclass

from goosectl.protocols.goose.errors import BadValue

_NS = 1_000_000_000
_FRAC = 1 << 24
#: one C call for seconds and (fraction << 8 | quality)
_SECONDS_REST = struct.Struct(">II").unpack_from

#: Quality octet bits (IEC 61850-8-1 TimeQuality).
LEAP_SECONDS_KNOWN = 0x80
CLOCK_FAILURE = 0x40
CLOCK_NOT_SYNCHRONIZED = 0x20
ACCURACY_MASK = 0x1F
ACCURACY_UNSPECIFIED = 31


@dataclass(slots=True, unsafe_hash=True)
class UtcTime:
    """A GOOSE/MMS UtcTime exactly as on the wire; helpers convert to ns and ISO 8601."""

    seconds: int
    fraction: int = 0
    quality: int = 0

    type_name = "utc-time"

    @classmethod
    def from_bytes(cls, raw: bytes, offset: int = 0) -> UtcTime:
        """Decode 8 content octets at ``offset`` (caller checked the length)."""
        seconds, rest = _SECONDS_REST(raw, offset)
        return cls(seconds, rest >> 8, rest & 0xFF)

    def to_bytes(self) -> bytes:
        """The 8 content octets; range errors name the offending part."""
        _check_seconds(self.seconds)
        if not 0 <= self.fraction < _FRAC:
            raise BadValue(f"utc-time fraction {self.fraction} outside 0..2**24-1")
        if not 0 <= self.quality < 256:
            raise BadValue(f"utc-time quality {self.quality} outside 0..255")
        return (
            self.seconds.to_bytes(4, "big")
            + self.fraction.to_bytes(3, "big")
            + bytes((self.quality,))
        )

    @classmethod
    def from_ns(cls, ns: int, quality: int = 0) -> UtcTime:
        """Nanoseconds since the Unix epoch -> UtcTime (fraction rounded up, see module doc)."""
        seconds, fraction = _split(ns)
        return cls(seconds, fraction, quality)

    def to_ns(self) -> int:
        """Nanoseconds since the Unix epoch (fraction truncated, like Wireshark prints it)."""
        return self.seconds * _NS + (self.fraction * _NS >> 24)

    def iso(self) -> str:
        """ISO 8601 UTC with nanoseconds, e.g. ``2012-03-23T08:12:20.153232157Z``."""
        base = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC) + _dt.timedelta(seconds=self.seconds)
        return f"{base:%Y-%m-%dT%H:%M:%S}.{self.fraction * _NS >> 24:09d}Z"

    @property
    def leap_seconds_known(self) -> bool:
        return bool(self.quality & LEAP_SECONDS_KNOWN)

    @property
    def clock_failure(self) -> bool:
        return bool(self.quality & CLOCK_FAILURE)

    @property
    def clock_not_synchronized(self) -> bool:
        return bool(self.quality & CLOCK_NOT_SYNCHRONIZED)

    @property
    def accuracy(self) -> int:
        """Number of significant fraction bits (0..24); 31 means unspecified."""
        return self.quality & ACCURACY_MASK


def _split(ns: int) -> tuple[int, int]:
    """(seconds, fraction) of `ns`, the fraction rounded up (see module doc)."""
    seconds, rem = divmod(ns, _NS)
    fraction = -((-rem * _FRAC) // _NS)  # ceiling
    if fraction == _FRAC:
        return seconds + 1, 0
    return seconds, fraction


def utc_octets(ns: int) -> bytes:
    """The seconds and fraction octets (seven, the quality apart) of `UtcTime.from_ns(ns)`,
    without the object: the trip reflex fills them into its trip-ack frame on the trip's
    path, where building and range-checking a UtcTime cost more than the frame's copy.
    Seconds outside 0..2**32-1 raise BadValue, as `UtcTime.to_bytes` does."""
    seconds, fraction = _split(ns)
    _check_seconds(seconds)
    return (seconds << 24 | fraction).to_bytes(7)


def _check_seconds(seconds: int) -> None:
    if not 0 <= seconds < 1 << 32:
        raise BadValue(f"utc-time seconds {seconds} outside 0..2**32-1")


def time_quality(
    *,
    leap_seconds_known: bool = False,
    clock_failure: bool = False,
    clock_not_synchronized: bool = False,
    accuracy: int = ACCURACY_UNSPECIFIED,
) -> int:
    """Build the quality octet from its named parts."""
    if not 0 <= accuracy <= ACCURACY_MASK:
        raise BadValue(f"time accuracy {accuracy} outside 0..31")
    return (
        (LEAP_SECONDS_KNOWN if leap_seconds_known else 0)
        | (CLOCK_FAILURE if clock_failure else 0)
        | (CLOCK_NOT_SYNCHRONIZED if clock_not_synchronized else 0)
        | accuracy
    )
