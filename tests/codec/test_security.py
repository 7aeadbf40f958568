"""The IEC 62351-6 extension codec: sign, verify, both header profiles, every malformed
extension named, and any single flipped octet of a signed frame refused."""

from __future__ import annotations

import pytest

from goosectl.protocols.goose import Boolean, GooseFrame, Integer, UtcTime, Vlan, encode_frame, mac
from goosectl.protocols.goose.header import S_BIT, parse_header
from goosectl.protocols.goose.security import (
    ALGORITHMS,
    PROFILES,
    BadExtension,
    MacKey,
    crc16_x25,
    parse,
    sign,
)

FRAME = GooseFrame(
    gocb_ref="IED1LD0/LLN0$GO$gcb01",
    dat_set="IED1LD0/LLN0$DS01",
    go_id="G1",
    all_data=(Boolean(True), Integer(7)),
    t=UtcTime(1_700_000_000, 0x123456, 0x0A),
    st_num=3,
    sq_num=9,
    appid=0x1001,
    src=mac("00:11:22:33:44:55"),
)
UNSIGNED = encode_frame(FRAME)
SECRET = bytes(range(32))
IV = bytes(range(100, 112))


def key(alg: str, key_id: int = 7, secret: bytes = SECRET) -> MacKey:
    a = ALGORITHMS[alg]
    return MacKey(key_id, a, secret[:16] if a.gmac else secret)


def signed(alg: str = "hmac-sha256-128", profile: str = "length-crc", **kw: object) -> bytes:
    k = key(alg)
    return sign(UNSIGNED, k, PROFILES[profile], iv=IV if k.algorithm.gmac else None, **kw)  # type: ignore[arg-type]


def verifies(buf: bytes, k: MacKey, profile: str = "length-crc") -> bool:
    ext = parse(buf, PROFILES[profile])
    return ext is not None and ext.key_id == k.key_id and k.check(ext.domain, ext.iv, ext.mac)


def test_crc16_x25_check_value() -> None:
    assert crc16_x25(b"123456789") == 0x906E


@pytest.mark.parametrize("alg", sorted(ALGORITHMS))
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_sign_then_verify_and_strip(alg: str, profile: str) -> None:
    buf = signed(alg, profile, time_of_current_key=1_700_000_000, time_to_next_key=-5)
    ext = parse(buf, PROFILES[profile])
    assert ext is not None
    assert (ext.version, ext.key_id, ext.time_of_current_key, ext.time_to_next_key) == (
        1,
        7,
        1_700_000_000,
        -5,
    )
    assert len(ext.mac) == ALGORITHMS[alg].mac_len
    assert verifies(buf, key(alg), profile)
    # what the rest of the receive path reads is the publisher's unsigned frame
    assert ext.unsigned == UNSIGNED
    # and a GOOSE parser that knows nothing of the extension reads the same goosePdu
    assert parse_header(buf).gocb_ref == FRAME.gocb_ref
    assert parse_header(buf).st_num == 3


def test_length_crc_profile_writes_length_and_crc() -> None:
    buf = signed("hmac-sha256-128", "length-crc")
    r1, r2 = int.from_bytes(buf[18:20]), int.from_bytes(buf[20:22])
    ext_len = len(buf) - len(UNSIGNED)
    assert r1 == ext_len  # first octet (the S-bit's) untouched
    assert r2 == crc16_x25(buf[12:20])
    # the S-bit survives signing under this profile
    sim = encode_frame(GooseFrame(**{**_fields(FRAME), "reserved1": S_BIT}))
    s = sign(sim, key("hmac-sha256-128"), PROFILES["length-crc"])
    assert int.from_bytes(s[18:20]) == S_BIT | ext_len
    assert parse_header(s).reserved1 & S_BIT


def test_flag_length_profile_writes_flag_and_length() -> None:
    buf = signed("aes-gmac-128", "flag-length")
    r1, r2 = int.from_bytes(buf[18:20]), int.from_bytes(buf[20:22])
    assert r1 == S_BIT
    assert r2 == len(buf) - len(UNSIGNED)
    sim = encode_frame(GooseFrame(**{**_fields(FRAME), "reserved1": S_BIT}))
    with pytest.raises(BadExtension, match="S-bit"):
        sign(sim, key("hmac-sha256-128"), PROFILES["flag-length"])


def test_profiles_do_not_read_each_other() -> None:
    """A frame signed under one profile is not verified under the other: it reads as
    unsigned, which a `required` subscription refuses."""
    assert parse(signed("hmac-sha256-128", "flag-length"), PROFILES["length-crc"]) is None
    assert parse(signed("hmac-sha256-128", "length-crc"), PROFILES["flag-length"]) is None


def test_unsigned_frame_has_no_extension() -> None:
    for profile in PROFILES.values():
        assert parse(UNSIGNED, profile) is None
        assert parse(UNSIGNED + bytes(20), profile) is None  # Ethernet padding


def test_vlan_tagged_frame() -> None:
    tagged = encode_frame(GooseFrame(**{**_fields(FRAME), "vlan": Vlan(5, 4)}))
    buf = sign(tagged, key("hmac-sha256-256"), PROFILES["length-crc"])
    assert verifies(buf, key("hmac-sha256-256"))
    ext = parse(buf, PROFILES["length-crc"])
    assert ext is not None and ext.unsigned == tagged


def test_padding_after_the_extension_is_ignored() -> None:
    buf = signed()
    assert verifies(buf + bytes(7), key("hmac-sha256-128"))


@pytest.mark.parametrize("alg", sorted(ALGORITHMS))
def test_wrong_secret_or_algorithm_fails(alg: str) -> None:
    buf = signed(alg)
    a = ALGORITHMS[alg]
    other = bytes(32 - i for i in range(32))
    assert not verifies(buf, MacKey(7, a, other[:16] if a.gmac else other))
    # the algorithm is the key's: the same secret under another algorithm never verifies
    for name, b in ALGORITHMS.items():
        if name != alg:
            assert not verifies(buf, MacKey(7, b, SECRET[:16] if b.gmac else SECRET))


@pytest.mark.parametrize("alg", ["hmac-sha256-80", "aes-gmac-128"])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_single_octet_flip_fails(alg: str, profile: str) -> None:
    """Flip each octet of a signed frame in turn: none verifies (a malformed extension,
    another key id, a goosePdu or header that is not what was signed, a wrong MAC)."""
    buf = signed(alg, profile)
    k = key(alg)
    assert verifies(buf, k, profile)
    for i in range(len(buf)):
        bad = bytearray(buf)
        bad[i] ^= 0x01 if i >= 12 else 0xFF
        if i < 12:
            # the addresses are outside the MAC domain (as in libiec61850 and the 2007
            # text); the subscriber's filters judge them. Everything else is covered.
            continue
        try:
            ok = verifies(bytes(bad), k, profile)
        except BadExtension:
            ok = False
        assert not ok, f"octet {i} flipped still verifies"


MALFORMED = {
    # name: (mutation of the signed frame, reason the error names)
    "truncated": (lambda b: b[:-3], "present"),
    "no outer tag": (lambda b: _at(b, 0, 0x30), "want 0xa0"),
    "no AuthenticationValue": (lambda b: _at(b, 2, 0xA5), "AuthenticationValue"),
    "version 2": (lambda b: _at(b, 6, 2), "Version 2"),
    "missing mAC tag": (lambda b: _at(b, -18, 0x86), "mAC"),
}


def _at(buf: bytes, rel: int, value: int) -> bytes:
    """Set one octet of the extension (relative to its start; negative from the end)."""
    start = len(UNSIGNED)
    i = start + rel if rel >= 0 else len(buf) + rel
    b = bytearray(buf)
    b[i] = value
    return bytes(b)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_extension_names_its_defect(name: str) -> None:
    mutate, reason = MALFORMED[name]
    with pytest.raises(BadExtension, match=reason) as err:
        parse(mutate(signed(profile="flag-length")), PROFILES["flag-length"])
    assert err.value.kind == "bad-extension"


def test_extension_longer_than_announced_or_extra_elements() -> None:
    buf = bytearray(signed(profile="flag-length"))
    buf[21] -= 1  # announces one octet fewer than the extension has
    with pytest.raises(BadExtension):
        parse(bytes(buf), PROFILES["flag-length"])


def test_crc_mismatch_is_a_bad_extension() -> None:
    buf = bytearray(signed())
    buf[21] ^= 1
    with pytest.raises(BadExtension, match="CRC"):
        parse(bytes(buf), PROFILES["length-crc"])


def test_gmac_needs_iv_and_hmac_refuses_one() -> None:
    with pytest.raises(BadExtension, match="IV required"):
        sign(UNSIGNED, key("aes-gmac-128"), PROFILES["length-crc"])
    with pytest.raises(BadExtension, match="IV unused"):
        sign(UNSIGNED, key("hmac-sha256-80"), PROFILES["length-crc"], iv=IV)


def test_gmac_differs_per_iv() -> None:
    k = key("aes-gmac-128")
    a = sign(UNSIGNED, k, PROFILES["length-crc"], iv=IV)
    b = sign(UNSIGNED, k, PROFILES["length-crc"], iv=bytes(12))
    assert a[-16:] != b[-16:]


def _fields(frame: GooseFrame) -> dict[str, object]:
    return {name: getattr(frame, name) for name in GooseFrame.__dataclass_fields__}
