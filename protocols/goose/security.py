"""The IEC 62351-6 security extension of a Layer-2 GOOSE frame: codec, MAC, header profiles.

Bytes only: which key a frame may be verified with, and whether that key is in force, is
policy (`controller/goose/auth.py`). The algorithm always comes from the caller's key,
never from the frame: an extension only names a key id, so a forger cannot choose a weaker
algorithm than the one configured for it.

Wire layout (libiec61850's unreleased `goose_sec.c`, the only open implementation; the
paywalled 62351-6 text is not checked). The extension follows the APDU, outside Length::

    dst src [802.1Q] 88B8 APPID Length Reserved1 Reserved2 | 61 L goosePdu |
    A0 L { A4 L { 80 Version=1, 81 TimeOfCurrentKey, 82 TimeToNextKey,
                  [83 IV (GMAC only)], 84 KeyID }, 85 mAC }

The MAC covers the octets from the EtherType through the end of the AuthenticationValue
(`A4`), i.e. everything but the addresses, the VLAN tag and the `85` TLV. How a receiver
finds the extension's length (after Length, where Ethernet padding also sits) is what the
header profile says (`PROFILES`); sources disagree, so it is configured, never guessed.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from hashlib import sha256
from typing import Any, Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from goosectl.protocols.goose.ber import encode_length, encode_signed, read_length, tlv
from goosectl.protocols.goose.errors import GooseError
from goosectl.protocols.goose.header import S_BIT

ETHERTYPE = b"\x88\xb8"
VERSION: Final = 1
IV_LEN: Final = 12


class BadExtension(GooseError):
    """A security extension that is missing where announced, truncated or malformed."""

    kind = "bad-extension"


@dataclass(frozen=True, slots=True)
class Algorithm:
    """A MAC algorithm: its name in key files, tag length and the libiec61850 enum value."""

    name: str
    mac_len: int
    gmac: bool
    code: int
    #: an AEAD that encrypts as well (R-GOOSE's AES-128-GCM): never a Layer-2 MAC key
    encrypts: bool = False


#: The algorithms a key entry may name (libiec61850 `MCSignatureAlgorithm` codes).
ALGORITHMS: Final[dict[str, Algorithm]] = {
    a.name: a
    for a in (
        Algorithm("hmac-sha256-80", 10, False, 1),
        Algorithm("hmac-sha256-128", 16, False, 2),
        Algorithm("hmac-sha256-256", 32, False, 3),
        Algorithm("aes-gmac-128", 16, True, 4),
    )
}
#: the ciphers a key entry may name besides, R-GOOSE only (`protocols/rgoose/spdu.py`):
#: the SPDU's payload encrypted, the 16-octet GCM tag in its trailer (the code is
#: IEC 61850-90-5's encryption value). A Layer-2 frame naming such a key fails as bad_mac
CIPHERS: Final[dict[str, Algorithm]] = {
    a.name: a for a in (Algorithm("aes-128-gcm", 16, False, 1, encrypts=True),)
}


class MacKey:
    """A secret bound to its algorithm, prepared once (HMAC pre-keyed, AES key expanded)."""

    __slots__ = ("_aes", "_hmac", "_inner", "_outer", "algorithm", "key_id")

    def __init__(self, key_id: int, algorithm: Algorithm, secret: bytes) -> None:
        if not 0 < key_id <= 0xFFFFFFFF:
            raise ValueError(f"key id {key_id} outside 1..2**32-1")
        if algorithm.gmac or algorithm.encrypts:
            if len(secret) != 16:
                raise ValueError(f"{algorithm.name} needs a 16-octet secret, got {len(secret)}")
            self._aes: AESGCM | None = AESGCM(secret)
            self._hmac = None
        else:
            if len(secret) < 16:
                raise ValueError(f"{algorithm.name} needs at least 16 secret octets")
            self._aes = None
            self._hmac = hmac.new(secret, digestmod=sha256)
            self._inner, self._outer = _pads(secret)
        self.key_id = key_id
        self.algorithm = algorithm

    def __deepcopy__(self, memo: dict[int, Any]) -> MacKey:
        """The key itself: prepared once and never changed (its states are copied before
        each use), so a copied controller (the reflex's property test) shares it; OpenSSL's
        contexts cannot be pickled."""
        return self

    def mac(self, domain: bytes, iv: bytes | None) -> bytes:
        """The tag over `domain` (GMAC: `domain` as associated data, nothing encrypted)."""
        if self.algorithm.encrypts:
            raise BadExtension(f"{self.algorithm.name} encrypts: it makes no MAC", path="mAC")
        if self._aes is not None:
            if iv is None or len(iv) != IV_LEN:
                raise BadExtension("AES-GMAC needs a 12-octet IV", path="IV")
            return self._aes.encrypt(iv, b"", domain)[: self.algorithm.mac_len]
        assert self._hmac is not None
        h = self._hmac.copy()
        h.update(domain)
        return h.digest()[: self.algorithm.mac_len]

    def check(self, domain: bytes, iv: bytes | None, tag: bytes) -> bool:
        """Whether `tag` is this key's MAC of `domain`, compared in constant time."""
        if len(tag) != self.algorithm.mac_len or self.algorithm.encrypts:
            return False
        if (iv is None) == self.algorithm.gmac:
            return False
        if self._aes is None:
            return self.check_hmac(domain, tag)
        return hmac.compare_digest(self.mac(domain, iv), tag)

    def seal(self, iv: bytes, plain: bytes, aad: bytes) -> tuple[bytes, bytes]:
        """AES-GCM (an `encrypts` key): `plain` -> (ciphertext, tag), `aad` authenticated."""
        if self._aes is None or not self.algorithm.encrypts or len(iv) != IV_LEN:
            raise ValueError(f"{self.algorithm.name} does not encrypt with a 12-octet IV")
        out = self._aes.encrypt(iv, plain, aad)
        return out[: -self.algorithm.mac_len], out[-self.algorithm.mac_len :]

    def open(self, iv: bytes, cipher: bytes, tag: bytes, aad: bytes) -> bytes | None:
        """The plaintext of an AES-GCM `cipher`, or None when its tag does not verify (the
        wrong key, any octet of `aad`, `cipher` or `tag` changed)."""
        if self._aes is None or not self.algorithm.encrypts:
            return None
        if len(iv) != IV_LEN or len(tag) != self.algorithm.mac_len:
            return None
        try:
            return self._aes.decrypt(iv, cipher + tag, aad)
        except InvalidTag:
            return None

    def check_hmac(self, domain: bytes | memoryview, tag: bytes) -> bool:
        """`check` for an HMAC key whose tag length the caller has checked: the
        retransmission path, which knows the extension's layout from the previous frame.

        RFC 2104 from the two SHA-256 states keyed once (`_pads`): two `copy()` and two
        digests, where `hmac.HMAC.copy()` + `digest()` copy OpenSSL's HMAC context twice
        and allocate three digest contexts (about half the time of the frame's MAC), and
        OpenSSL's one-shot `hmac.digest(key, msg, "sha256")` keys a new context on every
        call (callgrind: about 1.7 times this scheme's instructions over a trip frame's
        domain; docs/security-62351-6.md, Cost). A bytes `domain` costs less than a
        memoryview of the frame (fewer objects made for 100-odd octets)."""
        inner = self._inner.copy()
        inner.update(domain)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return hmac.compare_digest(outer.digest()[: self.algorithm.mac_len], tag)

    def check_gmac(self, domain: bytes | memoryview, iv: bytes | memoryview, tag: bytes) -> bool:
        """`check` for a GMAC key whose IV (12 octets) and tag length the caller has
        checked: the retransmission path and the armed reflex, which know the extension's
        layout. One `encrypt` of nothing with `domain` as associated data: `AESGCM` keeps
        the expanded key, and none of `check`'s argument checks run again per frame."""
        assert self._aes is not None
        mac = self._aes.encrypt(iv, b"", domain)
        return hmac.compare_digest(mac[: self.algorithm.mac_len], tag)


def _pads(secret: bytes) -> tuple[Any, Any]:
    """SHA-256 states after the HMAC key's inner and outer pad blocks (RFC 2104: a key
    longer than the 64-octet block is hashed first), for `MacKey.check_hmac`."""
    if len(secret) > 64:
        secret = sha256(secret).digest()
    block = secret.ljust(64, b"\0")
    return sha256(bytes(b ^ 0x36 for b in block)), sha256(bytes(b ^ 0x5C for b in block))


# -- header profiles -------------------------------------------------------------------------


@lru_cache(maxsize=256)
def crc16_x25(data: bytes) -> int:
    """CRC-16/X-25 (RFC 1662 FCS-16; check value 0x906E), the CRC libiec61850 ships for the
    security extension. Cached: a stream's header octets repeat on every retransmission."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x8408 if crc & 1 else crc >> 1
    return crc ^ 0xFFFF


@dataclass(frozen=True, slots=True)
class HeaderProfile:
    """How Reserved1/Reserved2 announce the extension that follows the APDU.

    `write(r1, r2, ext_len, head)` returns the reserved fields of a signed frame, `head`
    being the EtherType, APPID and Length octets; `length(r1, r2, head)` returns the
    extension length a received frame announces (0: none) or raises `BadExtension`;
    `clear(r1, r2)` gives back the fields the unsigned frame had.
    """

    name: str
    write: Callable[[int, int, int, bytes], tuple[int, int]]
    length: Callable[[int, int, bytes], int]
    clear: Callable[[int, int], tuple[int, int]]


def _lc_write(r1: int, r2: int, ext_len: int, head: bytes) -> tuple[int, int]:
    if ext_len > 0xFF:
        raise BadExtension(f"extension of {ext_len} octets does not fit Reserved1's octet")
    r1 = (r1 & 0xFF00) | ext_len
    return r1, crc16_x25(head + r1.to_bytes(2, "big"))


def _lc_length(r1: int, r2: int, head: bytes) -> int:
    n = r1 & 0xFF
    if n and crc16_x25(head + r1.to_bytes(2, "big")) != r2:
        raise BadExtension("Reserved2 is not the CRC of the header", path="reserved2")
    return n


def _fl_write(r1: int, r2: int, ext_len: int, head: bytes) -> tuple[int, int]:
    if r1 & S_BIT:
        raise BadExtension("the flag-length profile has no room for the S-bit (simulation)")
    return r1 | S_BIT, ext_len


def _fl_length(r1: int, r2: int, head: bytes) -> int:
    return r2 if r1 & S_BIT else 0


#: The named header profiles (documented field by field in docs/security-62351-6.md).
PROFILES: Final[dict[str, HeaderProfile]] = {
    p.name: p
    for p in (
        # the 62351-6:2007 reading: the second octet of Reserved1 holds the extension's
        # length and Reserved2 a CRC-16/X-25 of EtherType, APPID, Length and Reserved1; the
        # S-bit in Reserved1's first octet keeps its meaning
        HeaderProfile("length-crc", _lc_write, _lc_length, lambda r1, r2: (r1 & 0xFF00, 0)),
        # the 62351-6:2020 reading of one clean-room model: Reserved1 bit 15 flags the
        # extension and Reserved2 holds its length; bit 15 is also the Ed2.1 S-bit, so a
        # signed frame cannot say it is simulated under this profile
        HeaderProfile("flag-length", _fl_write, _fl_length, lambda r1, r2: (r1 & ~S_BIT, 0)),
    )
}
DEFAULT_PROFILE: Final = "length-crc"


# -- the extension ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Extension:
    """A parsed extension; `domain` is the MAC domain's octets, `unsigned` the frame as it
    was before it was signed (Length, reserved fields and bytes as the publisher built
    them), which is what the rest of the receive path reads."""

    version: int
    time_of_current_key: int
    time_to_next_key: int
    iv: bytes | None
    key_id: int
    mac: bytes
    domain: bytes
    unsigned: bytes


def _apdu_bounds(buf: bytes) -> tuple[int, int, int, int]:
    """(EtherType offset, APPID offset, end of Length's APDU, frame length)."""
    n = len(buf)
    off = 16 if n >= 18 and buf[12] == 0x81 and buf[13] == 0 else 12
    if n < off + 10 or buf[off : off + 2] != ETHERTYPE:
        raise BadExtension("not a GOOSE frame (EtherType 0x88b8 and header)", offset=off)
    length = buf[off + 4] << 8 | buf[off + 5]
    end = off + 2 + length
    if length < 8 or end > n:
        raise BadExtension(f"Length {length} does not fit the frame", offset=off + 4)
    return off, off + 2, end, n


def _uint(buf: bytes, start: int, stop: int, name: str, signed: bool) -> int:
    n = stop - start
    if not 1 <= n <= 4 + (not signed):
        raise BadExtension(f"{name} of {n} octets", offset=start, path=name)
    if n > 1 and (
        (buf[start] == 0 and not buf[start + 1] & 0x80)
        or (buf[start] == 0xFF and buf[start + 1] & 0x80)
    ):
        raise BadExtension(f"{name} is not minimally encoded", offset=start, path=name)
    value = int.from_bytes(buf[start:stop], "big", signed=True)
    lo, hi = (-(1 << 31), (1 << 31) - 1) if signed else (0, 0xFFFFFFFF)
    if not lo <= value <= hi:
        raise BadExtension(f"{name} {value} out of range", offset=start, path=name)
    return value


#: the AuthenticationValue's elements in order: tag -> (name, optional)
_FIELDS: Final = ((0x80, "Version"), (0x81, "TimeOfCurrentKey"), (0x82, "TimeToNextKey"))


def parse(buf: bytes, profile: HeaderProfile) -> Extension | None:
    """The extension of a frame, or None when its header announces none; `BadExtension`
    (with offset and field) for anything announced but not exactly as laid out."""
    off, appid, apdu_end, n = _apdu_bounds(buf)
    r1 = buf[appid + 4] << 8 | buf[appid + 5]
    r2 = buf[appid + 6] << 8 | buf[appid + 7]
    ext_len = profile.length(r1, r2, buf[off : appid + 4])
    if ext_len == 0:
        return None
    ext_end = apdu_end + ext_len
    if ext_end > n:
        raise BadExtension(
            f"extension of {ext_len} octets announced, {n - apdu_end} present",
            offset=apdu_end,
            path="SecurityExtension",
        )
    try:
        return _parse_at(buf, off, appid, apdu_end, ext_end, profile, r1, r2)
    except GooseError as exc:
        if isinstance(exc, BadExtension):
            raise
        raise BadExtension(exc.reason, offset=exc.offset, path=exc.path) from None


def _parse_at(
    buf: bytes, off: int, appid: int, apdu_end: int, ext_end: int, profile: HeaderProfile,
    r1: int, r2: int,
) -> Extension:  # fmt: skip
    """The SecurityExtension after the APDU (at `apdu_end`, up to `ext_end`), each element
    checked in its order; one function, as it runs for every signed frame."""
    pos = apdu_end
    if buf[pos] != 0xA0:
        raise BadExtension(
            f"tag 0x{buf[pos]:02x} (want 0xa0)", offset=pos, path="SecurityExtension"
        )
    ln, pos = read_length(buf, pos + 1, ext_end)
    if pos + ln != ext_end:
        raise BadExtension(
            f"SecurityExtension of {ln} octets in an announced {ext_end - pos}",
            offset=pos,
            path="SecurityExtension",
        )
    if pos >= ext_end or buf[pos] != 0xA4:
        raise BadExtension("AuthenticationValue (0xa4) missing", offset=pos, path="A4")
    av_len, p = read_length(buf, pos + 1, ext_end)
    av_end = p + av_len
    vals: list[int] = []
    for tag, name in _FIELDS:
        if p >= av_end or buf[p] != tag:
            raise BadExtension(f"{name} (0x{tag:02x}) missing", offset=p, path=name)
        ln, start = read_length(buf, p + 1, av_end)
        p = start + ln
        vals.append(_uint(buf, start, p, name, signed=tag == 0x82))
    if vals[0] != VERSION:
        raise BadExtension(f"Version {vals[0]} (want {VERSION})", offset=p, path="Version")
    iv = None
    if p < av_end and buf[p] == 0x83:
        ln, start = read_length(buf, p + 1, av_end)
        if ln != IV_LEN:
            raise BadExtension(f"IV of {ln} octets (want {IV_LEN})", offset=start, path="IV")
        p = start + ln
        iv = buf[start:p]
    if p >= av_end or buf[p] != 0x84:
        raise BadExtension("KeyID (0x84) missing", offset=p, path="KeyID")
    ln, start = read_length(buf, p + 1, av_end)
    p = start + ln
    key_id = _uint(buf, start, p, "KeyID", signed=False)
    if p != av_end:
        raise BadExtension(
            f"element 0x{buf[p]:02x} after KeyID", offset=p, path="AuthenticationValue"
        )
    if p >= ext_end or buf[p] != 0x85:
        raise BadExtension("mAC (0x85) missing", offset=p, path="mAC")
    ln, start = read_length(buf, p + 1, ext_end)
    if start + ln != ext_end:
        raise BadExtension("octets after mAC", offset=start + ln, path="mAC")
    r1c, r2c = profile.clear(r1, r2)
    head = buf[: appid + 4] + r1c.to_bytes(2, "big") + r2c.to_bytes(2, "big")
    return Extension(vals[0], vals[1], vals[2], iv, key_id, buf[start:ext_end], buf[off:av_end],
                     head + buf[appid + 8 : apdu_end] + buf[ext_end:])  # fmt: skip


def sign(
    frame: bytes,
    key: MacKey,
    profile: HeaderProfile,
    *,
    iv: bytes | None = None,
    time_of_current_key: int = 0,
    time_to_next_key: int = 0,
) -> bytes:
    """An unsigned frame (as `encode_frame` or `FrameTemplate.build` wrote it, padding
    allowed) -> the same frame with the extension after its APDU and its reserved fields
    set by `profile`. GMAC keys need a fresh 12-octet `iv` per frame (the caller's
    counter: an IV must never repeat under one key)."""
    off, appid, apdu_end, _ = _apdu_bounds(frame)
    if (iv is not None) != key.algorithm.gmac:
        raise BadExtension(f"{key.algorithm.name}: IV {'required' if iv is None else 'unused'}")
    if iv is not None and len(iv) != IV_LEN:
        raise BadExtension(f"IV of {len(iv)} octets (want {IV_LEN})", path="IV")
    av = b"".join(
        (
            b"\x80\x01\x01",
            tlv(0x81, encode_signed(time_of_current_key)),
            tlv(0x82, encode_signed(time_to_next_key)),
            b"" if iv is None else b"\x83\x0c" + iv,
            tlv(0x84, encode_signed(key.key_id)),
        )
    )
    av_tlv = tlv(0xA4, av)
    mac_len = key.algorithm.mac_len
    inner = len(av_tlv) + 2 + mac_len
    ext_head = b"\xa0" + encode_length(inner)
    ext_len = len(ext_head) + inner
    r1 = frame[appid + 4] << 8 | frame[appid + 5]
    r2 = frame[appid + 6] << 8 | frame[appid + 7]
    r1, r2 = profile.write(r1, r2, ext_len, frame[off : appid + 4])
    head = frame[: appid + 4] + r1.to_bytes(2, "big") + r2.to_bytes(2, "big")
    signed = head + frame[appid + 8 : apdu_end] + ext_head + av_tlv
    tag = key.mac(signed[off:], iv)
    return signed + bytes((0x85, mac_len)) + tag
