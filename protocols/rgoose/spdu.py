"""The R-GOOSE SPDU (IEC 61850-90-5 session protocol, version 2): encode, strict decode,
verify (HMAC-SHA256) and decrypt (AES-128-GCM).

Wire layout, as libiec61850 1.6 emits it (checked byte for byte against its captures in
`tests/data/rgoose/`; the paywalled standard was not read)::

    01 40                      CLTP unit data (LI, TI)
    A1 LI                      session identifier GOOSE, session header length
    80 LI                      common header tag, its length
    SPDU length (4)  SPDU number (4)  version (2) = 2
    TimeOfCurrentKey (4)  TimeToNextKey (2, signed)  KeyID (4; 0 = unsecured)
    IV length (1)  IV (0 or 12 octets, GCM)
    payload length (4)
    { 81  simulation (1)  APPID (2)  APDU length (2)  goosePdu (61 L ...) } ...
    [AF L padding]  85 L MAC-or-GCM-tag              (secured only)

An HMAC covers every octet before the trailer; GCM encrypts the payload elements, with
every octet before them as associated data, and puts its tag in the trailer. The three
length fields are counted differently by libiec61850 (fixed 24 and 18, an SPDU length of
payload + 20, APDU length + 2) and by a reading that makes them consistent (go-iec61850):
the decoder accepts exactly those two `LAYOUTS` and nothing else, and `encode` writes
either. The algorithm is the caller's key's, never the SPDU's (version 2 names none).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from goosectl.protocols.goose.ber import read_length
from goosectl.protocols.goose.errors import GooseError
from goosectl.protocols.goose.security import IV_LEN, MacKey

#: the UDP port of the session protocol (unicast and multicast)
PORT: Final = 102
#: session identifier of a GOOSE SPDU
SI_GOOSE: Final = 0xA1
#: payload element type of a goosePdu
PAYLOAD_GOOSE: Final = 0x81
VERSION: Final = 2
TAG_COMMON: Final = 0x80
TAG_PADDING: Final = 0xAF
TAG_SIGNATURE: Final = 0x85
#: the fixed fields: (name, size) from the first octet up to and including the IV length
HEAD: Final = (
    ("LI", 1),
    ("TI", 1),
    ("SI", 1),
    ("session header length", 1),
    ("common header tag", 1),
    ("common header length", 1),
    ("SPDU length", 4),
    ("SPDU number", 4),
    ("version", 2),
    ("TimeOfCurrentKey", 4),
    ("TimeToNextKey", 2),
    ("KeyID", 4),
    ("IV length", 1),
)
HEAD_LEN: Final = sum(n for _, n in HEAD)
#: fields that must hold one value: name -> value
CONSTANTS: Final = {
    "LI": 0x01,
    "TI": 0x40,
    "SI": SI_GOOSE,
    "common header tag": TAG_COMMON,
    "version": VERSION,
}
#: the octets of an element's header: type, simulation, APPID, APDU length
ELEMENT_HEAD: Final = 6


class BadSpdu(GooseError):
    """An SPDU that is truncated, malformed or not the session protocol's GOOSE SPDU."""

    kind = "bad-spdu"


class SpduRefused(GooseError):
    """A well-formed secured SPDU that the key does not verify; `reason` as the auth gate
    counts it (`bad_mac`)."""

    kind = "refused"


@dataclass(frozen=True, slots=True)
class Layout:
    """How the three length fields are counted (`LAYOUTS`): each a function of the IV
    length, and of the payload and total lengths, so encode and decode share them."""

    name: str
    session_len: Callable[[int], int]
    common_len: int
    spdu_len: Callable[[int, int], int]
    #: what the last element's APDU length adds to the APDU's octets
    apdu_extra: int


LAYOUTS: Final[dict[str, Layout]] = {
    lay.name: lay
    for lay in (
        # the lengths make sense: the session header counts the common header and the
        # security information, the SPDU length every octet after it (trailer included)
        Layout("consistent", lambda iv: 23 + iv, 10, lambda payload, total: total - 10, 0),
        # libiec61850 1.6: fixed header lengths, the SPDU length without the IV and the
        # trailer, the APDU length counting its own two octets
        Layout("libiec61850", lambda iv: 24, 18, lambda payload, total: payload + 20, 2),
    )
}
DEFAULT_LAYOUT: Final = "consistent"


@dataclass(frozen=True, slots=True)
class Apdu:
    """One payload element: the goosePdu (from its `61` tag) with the APPID and simulation
    flag that the session carries instead of an Ethernet header."""

    appid: int
    pdu: bytes
    simulation: bool = False


@dataclass(frozen=True, slots=True)
class Spdu:
    """A decoded SPDU. `apdus` is filled for an unsecured one; a secured one's payload
    (`user`, ciphertext under GCM) is read by `open_spdu` once its key verifies it."""

    spdu_number: int
    key_id: int
    time_of_current_key: int
    time_to_next_key: int
    iv: bytes
    user: bytes
    #: what the trailer's MAC covers (every octet before the trailer), and the associated
    #: data of GCM (every octet before the payload)
    signed: bytes
    aad: bytes
    tag: bytes | None
    apdus: tuple[Apdu, ...]
    layout: str

    @property
    def secured(self) -> bool:
        return self.key_id != 0


def _u(buf: bytes, off: int, n: int) -> int:
    return int.from_bytes(buf[off : off + n], "big")


def _elements(user: bytes, base: int, extra_ok: bool) -> tuple[Apdu, ...]:
    """The payload elements; `base` is the payload's offset in the SPDU (for errors),
    `extra_ok` whether the last APDU length may count two more octets (libiec61850)."""
    out: list[Apdu] = []
    pos, n = 0, len(user)
    if n == 0:
        raise BadSpdu("empty payload", offset=base, path="payload")
    while pos < n:
        at = base + pos
        if n - pos < ELEMENT_HEAD:
            raise BadSpdu(f"element header of {n - pos} octets", offset=at, path="payload")
        if user[pos] != PAYLOAD_GOOSE:
            raise BadSpdu(
                f"payload type 0x{user[pos]:02x} (want 0x81 GOOSE)", offset=at, path="type"
            )
        if user[pos + 1] > 1:
            raise BadSpdu(
                f"simulation octet {user[pos + 1]} (want 0 or 1)", offset=at + 1, path="simulation"
            )
        length = _u(user, pos + 4, 2)
        start = pos + ELEMENT_HEAD
        rest = n - start
        if length > rest and not (extra_ok and length == rest + 2):
            raise BadSpdu(
                f"APDU length {length}, {rest} octets remain", offset=at + 4, path="APDU length"
            )
        length = min(length, rest)
        pdu = user[start : start + length]
        if not pdu or pdu[0] != 0x61:
            raise BadSpdu("goosePdu (0x61) missing", offset=base + start, path="goosePdu")
        try:
            ln, body = read_length(pdu, 1, len(pdu))
        except GooseError as exc:
            raise BadSpdu(exc.reason, offset=base + start + 1, path="goosePdu") from None
        if body + ln != len(pdu):
            raise BadSpdu(
                f"goosePdu of {body + ln} octets in an APDU of {len(pdu)}",
                offset=base + start + 1,
                path="goosePdu",
            )
        out.append(Apdu(_u(user, pos + 2, 2), pdu, user[pos + 1] == 1))
        pos = start + length
    return tuple(out)


def decode(buf: bytes) -> Spdu:
    """Strictly decode one UDP payload; `BadSpdu` names the offset and field of the first
    defect. A secured SPDU (KeyID not 0) must end in its trailer: one whose trailer was cut
    off is refused, never read as unsecured; an unsecured one has nothing after its
    payload."""
    n = len(buf)
    if n < HEAD_LEN:
        raise BadSpdu(f"{n} octets, the session header needs {HEAD_LEN}", offset=n, path="SPDU")
    fields, offsets, off = _head_fields(buf)
    iv_len = fields["IV length"]
    if iv_len not in (0, IV_LEN):
        raise BadSpdu(f"IV of {iv_len} octets (want 0 or 12)", offset=off - 1, path="IV length")
    key_id = fields["KeyID"]
    if key_id == 0 and iv_len:
        raise BadSpdu("an IV in an unsecured SPDU", offset=off - 1, path="IV length")
    if n < off + iv_len + 4:
        raise BadSpdu("the SPDU ends in its IV or payload length", offset=off, path="IV")
    iv = buf[off : off + iv_len]
    off += iv_len
    user_len = _u(buf, off, 4)
    user_start = off + 4
    user_end = user_start + user_len
    if user_end > n:
        raise BadSpdu(
            f"payload length {user_len}, {n - user_start} octets follow",
            offset=off,
            path="payload length",
        )
    trailer, tag = _trailer(buf, key_id, user_end)
    layout = _layout(buf, fields, offsets, iv_len, user_len, n)
    extra_ok = layout.apdu_extra > 0
    user = buf[user_start:user_end]
    apdus = _elements(user, user_start, extra_ok) if key_id == 0 else ()
    return Spdu(fields["SPDU number"], key_id, fields["TimeOfCurrentKey"],
                _signed16(fields["TimeToNextKey"]), iv, user, buf[:trailer], buf[:user_start],
                tag, apdus, layout.name)  # fmt: skip


def _head_fields(buf: bytes) -> tuple[dict[str, int], dict[str, int], int]:
    """The session and common header's fields (`HEAD`) and their offsets, the constant
    ones checked; and the offset after them."""
    fields: dict[str, int] = {}
    offsets: dict[str, int] = {}
    off = 0
    for name, size in HEAD:
        fields[name], offsets[name] = _u(buf, off, size), off
        want = CONSTANTS.get(name)
        if want is not None and fields[name] != want:
            raise BadSpdu(f"{name} 0x{fields[name]:02x} (want 0x{want:02x})", offset=off, path=name)
        off += size
    return fields, offsets, off


def _trailer(buf: bytes, key_id: int, user_end: int) -> tuple[int, bytes | None]:
    """Where the signed octets end, and the signature: an unsecured SPDU (KeyID 0) has
    nothing after its payload; a secured one ends in its 0x85 trailer (after optional
    padding), or is refused, never read as unsecured."""
    n = len(buf)
    if key_id == 0:
        if user_end != n:
            raise BadSpdu(
                f"{n - user_end} octets after the payload of an unsecured SPDU",
                offset=user_end,
                path="trailer",
            )
        return user_end, None
    trailer = user_end
    if trailer + 2 <= n and buf[trailer] == TAG_PADDING:
        trailer += 2 + buf[trailer + 1]
    if trailer + 2 > n or buf[trailer] != TAG_SIGNATURE:
        raise BadSpdu(
            f"secured SPDU (KeyID {key_id}) without its 0x85 trailer",
            offset=min(trailer, n),
            path="signature",
        )
    if trailer + 2 + buf[trailer + 1] != n:
        raise BadSpdu(
            f"signature of {buf[trailer + 1]} octets, {n - trailer - 2} present",
            offset=trailer + 1,
            path="signature",
        )
    return trailer, buf[trailer + 2 :]


def _signed16(v: int) -> int:
    return v - 0x10000 if v & 0x8000 else v


def _layout(
    buf: bytes, fields: dict[str, int], offsets: dict[str, int], iv_len: int, user: int, n: int
) -> Layout:
    """The layout whose three length fields the SPDU carries; BadSpdu naming the field
    that fits none."""
    for lay in LAYOUTS.values():
        if (
            fields["session header length"] == lay.session_len(iv_len)
            and fields["common header length"] == lay.common_len
            and fields["SPDU length"] == lay.spdu_len(user, n)
        ):
            return lay
    checks: tuple[tuple[str, Callable[[Layout], int]], ...] = (
        ("session header length", lambda lay: lay.session_len(iv_len)),
        ("common header length", lambda lay: lay.common_len),
        ("SPDU length", lambda lay: lay.spdu_len(user, n)),
    )
    # the layout the first length field names (or any), then its first field that differs
    first = [lay for lay in LAYOUTS.values() if fields[checks[0][0]] == checks[0][1](lay)]
    lay = (first or list(LAYOUTS.values()))[0]
    for name, want in checks:
        if fields[name] != want(lay):
            raise BadSpdu(
                f"{name} {fields[name]} (want {want(lay)}, the {lay.name} layout)",
                offset=offsets[name],
                path=name,
            )
    raise AssertionError("unreachable: every field matched the layout")


def open_spdu(spdu: Spdu, key: MacKey) -> tuple[Apdu, ...]:
    """The payload of a secured SPDU once `key` verifies it (HMAC over every octet before
    the trailer, compared in constant time) or decrypts it (AES-128-GCM); `SpduRefused`
    (`bad_mac`) otherwise: the wrong key material, another algorithm, a tag of the wrong
    length, an IV where HMAC wants none, any octet changed."""
    if spdu.tag is None or spdu.key_id != key.key_id:
        raise SpduRefused("bad_mac", path="signature")
    alg = key.algorithm
    extra_ok = LAYOUTS[spdu.layout].apdu_extra > 0
    base = len(spdu.aad)
    if alg.encrypts:
        plain = key.open(spdu.iv, spdu.user, spdu.tag, spdu.aad)
        if plain is None:
            raise SpduRefused("bad_mac", path="signature")
        return _elements(plain, base, extra_ok)
    if alg.gmac or spdu.iv or len(spdu.tag) != alg.mac_len:
        raise SpduRefused("bad_mac", path="signature")
    if not hmac.compare_digest(key.mac(spdu.signed, None), spdu.tag):
        raise SpduRefused("bad_mac", path="signature")
    return _elements(spdu.user, base, extra_ok)


def unverified_apdus(spdu: Spdu) -> tuple[Apdu, ...]:
    """The payload of a signed SPDU read without checking its MAC, for a policy that
    counts what a refused SPDU claimed to be (its subscription); never trust it. `BadSpdu`
    if it does not parse, and nothing for an encrypted one (an IV in its header)."""
    if spdu.iv:
        return ()
    return _elements(spdu.user, len(spdu.aad), LAYOUTS[spdu.layout].apdu_extra > 0)


def encode(
    apdus: tuple[Apdu, ...] | list[Apdu],
    spdu_number: int,
    *,
    key: MacKey | None = None,
    iv: bytes | None = None,
    time_of_current_key: int = 0,
    time_to_next_key: int = 0,
    layout: str = DEFAULT_LAYOUT,
) -> bytes:
    """One SPDU carrying `apdus`: unsecured without a key, signed with an HMAC key,
    encrypted with an AES-128-GCM key (which needs a fresh 12-octet `iv`: it must never
    repeat under one key)."""
    lay = LAYOUTS[layout]
    encrypts = _check_encode_args(apdus, spdu_number, key, iv)
    iv = iv or b""
    parts: list[bytes] = []
    for i, a in enumerate(apdus):
        extra = lay.apdu_extra if i == len(apdus) - 1 else 0
        if not 0 <= a.appid <= 0xFFFF or len(a.pdu) + extra > 0xFFFF:
            raise ValueError(f"APPID {a.appid:#x} or an APDU of {len(a.pdu)} octets")
        parts.append(
            bytes((PAYLOAD_GOOSE, int(a.simulation)))
            + a.appid.to_bytes(2, "big")
            + (len(a.pdu) + extra).to_bytes(2, "big")
            + a.pdu
        )
    user = b"".join(parts)
    trailer = 0 if key is None else 2 + key.algorithm.mac_len
    total = HEAD_LEN + len(iv) + 4 + len(user) + trailer
    head = b"".join(
        (
            bytes((0x01, 0x40, SI_GOOSE, lay.session_len(len(iv)), TAG_COMMON, lay.common_len)),
            lay.spdu_len(len(user), total).to_bytes(4, "big"),
            spdu_number.to_bytes(4, "big"),
            VERSION.to_bytes(2, "big"),
            (time_of_current_key & 0xFFFFFFFF).to_bytes(4, "big"),
            (time_to_next_key & 0xFFFF).to_bytes(2, "big"),
            (0 if key is None else key.key_id).to_bytes(4, "big"),
            bytes((len(iv),)),
            iv,
            len(user).to_bytes(4, "big"),
        )
    )
    if key is None:
        return head + user
    if encrypts:
        cipher, tag = key.seal(iv, user, head)
        return head + cipher + bytes((TAG_SIGNATURE, len(tag))) + tag
    body = head + user
    tag = key.mac(body, None)
    return body + bytes((TAG_SIGNATURE, len(tag))) + tag


def _check_encode_args(
    apdus: tuple[Apdu, ...] | list[Apdu], spdu_number: int, key: MacKey | None, iv: bytes | None
) -> bool:
    """`encode`'s arguments checked (ValueError saying which is wrong); True if `key`
    encrypts."""
    if not apdus:
        raise ValueError("an SPDU carries at least one APDU")
    if not 0 <= spdu_number <= 0xFFFFFFFF:
        raise ValueError(f"SPDU number {spdu_number} outside 0..2**32-1")
    encrypts = key is not None and key.algorithm.encrypts
    if key is not None and key.algorithm.gmac:
        raise ValueError(f"{key.algorithm.name}: R-GOOSE signs with HMAC or encrypts with GCM")
    if (iv is not None) != encrypts or (iv is not None and len(iv) != IV_LEN):
        raise ValueError("a 12-octet IV with an AES-128-GCM key, and only with one")
    return encrypts


# -- the bridge to the Layer-2 machines ---------------------------------------------------

ETHERTYPE_GOOSE: Final = b"\x88\xb8"
S_BIT: Final = 0x8000


def frame_of_apdu(apdu: Apdu, dst: bytes, src: bytes) -> bytes:
    """The untagged Layer-2 GOOSE frame that carries `apdu`'s goosePdu, so R-GOOSE runs
    through the same subscriber machines and gates as Ethernet GOOSE: its APPID, Length,
    and the simulation octet as Reserved1's S-bit (IEC 61850-8-1 Ed2.1)."""
    r1 = S_BIT if apdu.simulation else 0
    return b"".join(
        (
            dst,
            src,
            ETHERTYPE_GOOSE,
            apdu.appid.to_bytes(2, "big"),
            (8 + len(apdu.pdu)).to_bytes(2, "big"),
            r1.to_bytes(2, "big"),
            b"\0\0",
            apdu.pdu,
        )
    )


def apdu_of_frame(frame: bytes) -> Apdu:
    """The APDU an R-GOOSE publisher sends for a Layer-2 GOOSE frame the publisher machine
    built (802.1Q tag and Ethernet padding allowed): APPID, S-bit and goosePdu."""
    off = 16 if len(frame) >= 18 and frame[12:14] == b"\x81\x00" else 12
    if len(frame) < off + 12 or frame[off : off + 2] != ETHERTYPE_GOOSE:
        raise BadSpdu("not a GOOSE frame (EtherType 0x88b8)", offset=off, path="EtherType")
    length = _u(frame, off + 4, 2)
    if length < 10 or off + 2 + length > len(frame):
        raise BadSpdu(f"Length {length} does not fit the frame", offset=off + 4, path="Length")
    return Apdu(
        _u(frame, off + 2, 2),
        frame[off + 10 : off + 2 + length],
        bool(_u(frame, off + 6, 2) & S_BIT),
    )
