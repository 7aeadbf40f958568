"""MAC addresses between the text people write in configs and the 6 bytes on the wire.

Subscriptions name their destination groups as text (``01-0C-CD-01-00-01`` in SCL,
``01:0c:cd:01:00:01`` elsewhere); the socket needs bytes. One parser, one clear error.
"""

from __future__ import annotations

import re

_SEPARATED = re.compile(r"^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$")
_BARE = re.compile(r"^[0-9A-Fa-f]{12}$")


class MacError(ValueError):
    """Text or bytes that are not a MAC address."""


def parse_mac(value: str | bytes | bytearray) -> bytes:
    """Accept ``aa:bb:..``, ``AA-BB-..``, 12 hex digits, or 6 raw bytes; return 6 bytes."""
    if isinstance(value, bytes | bytearray):
        if len(value) != 6:
            raise MacError(f"MAC address must be 6 bytes, got {len(value)}: {bytes(value)!r}")
        return bytes(value)
    if not isinstance(value, str):
        raise MacError(f"MAC address must be text or bytes, got {type(value).__name__}")
    text = value.strip()
    if _SEPARATED.match(text):
        return bytes.fromhex(text.replace(":", "").replace("-", ""))
    if _BARE.match(text):
        return bytes.fromhex(text)
    raise MacError(f"not a MAC address: {value!r} (expected six hex pairs like 01:0c:cd:01:00:01)")


def format_mac(mac: bytes) -> str:
    """Lower-case, colon-separated, the way `ip link` prints it."""
    return ":".join(f"{b:02x}" for b in parse_mac(mac))


def is_multicast(mac: bytes) -> bool:
    """Group address bit (I/G) of the first octet; GOOSE destinations always have it set."""
    return bool(parse_mac(mac)[0] & 1)
