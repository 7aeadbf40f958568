"""The R-GOOSE SPDU codec against libiec61850's own SPDUs, and against itself."""

from __future__ import annotations

import pytest

from goosectl.protocols.goose import decode_frame
from goosectl.protocols.goose.security import MacKey
from goosectl.protocols.rgoose import (
    Apdu,
    BadSpdu,
    SpduRefused,
    apdu_of_frame,
    decode,
    encode,
    frame_of_apdu,
    open_spdu,
)
from tests.rgoose.vectors import GCM128, HMAC128, UNSECURED, key

SECURED = {"hmac-sha256-128": HMAC128, "aes-128-gcm": GCM128}
DST, SRC = bytes.fromhex("010ccd010001"), bytes.fromhex("020000000001")


def _values(apdus: tuple[Apdu, ...]) -> tuple[int, str, int, list[object]]:
    """What a subscriber reads: APPID, gocbRef, stNum and the data set's values."""
    (a,) = apdus
    f = decode_frame(frame_of_apdu(a, DST, SRC))
    return a.appid, f.gocb_ref, f.st_num, [d.value for d in f.all_data]  # type: ignore[attr-defined]


def _verify(buf: bytes, keys: dict[int, MacKey]) -> tuple[Apdu, ...]:
    spdu = decode(buf)
    if not spdu.secured:
        return spdu.apdus
    k = keys.get(spdu.key_id)
    if k is None:
        raise LookupError(f"unknown key {spdu.key_id}")
    return open_spdu(spdu, k)


def test_the_three_libiec61850_spdus_carry_the_same_goose() -> None:
    want = (0x3001, "GOISIM/LLN0$GO$gcb1", 1, [1234, True, "r-goose"])
    assert _values(decode(UNSECURED).apdus) == want
    for alg, buf in SECURED.items():
        spdu = decode(buf)
        assert (spdu.key_id, spdu.spdu_number, spdu.layout) == (1, 0, "libiec61850")
        assert spdu.apdus == ()  # nothing is read before the key has verified it
        assert _values(open_spdu(spdu, key(alg))) == want


@pytest.mark.parametrize("alg", sorted(SECURED))
def test_every_single_octet_flip_of_a_secured_spdu_fails(alg: str) -> None:
    buf = SECURED[alg]
    keys = {1: key(alg)}
    for i in range(len(buf)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(buf)
            bad[i] ^= mask
            with pytest.raises((BadSpdu, SpduRefused, LookupError)):
                _verify(bytes(bad), keys)


@pytest.mark.parametrize("alg", sorted(SECURED))
def test_a_cut_trailer_is_not_taken_as_unsecured(alg: str) -> None:
    buf = SECURED[alg]
    for cut in range(1, 19):
        with pytest.raises(BadSpdu) as exc:
            decode(buf[:-cut])
        assert exc.value.path in ("signature", "payload length")
    # nor one whose key id was cleared to make it look unsecured
    cleared = bytearray(buf)
    cleared[22:26] = bytes(4)
    with pytest.raises(BadSpdu, match="unsecured"):
        decode(bytes(cleared))


@pytest.mark.parametrize("alg", sorted(SECURED))
def test_wrong_key_material_and_algorithm_fail_as_bad_mac(alg: str) -> None:
    spdu = decode(SECURED[alg])
    other = "aes-128-gcm" if alg.startswith("hmac") else "hmac-sha256-128"
    for k in (
        key(alg, material=bytes(range(1, 17))),
        key(other),
        key("hmac-sha256-256"),
        key("hmac-sha256-80"),
    ):
        with pytest.raises(SpduRefused, match="bad_mac"):
            open_spdu(spdu, k)


def test_an_unknown_key_id_is_told_apart() -> None:
    with pytest.raises(LookupError, match="unknown key 1"):
        _verify(HMAC128, {2: key("hmac-sha256-128", key_id=2)})


@pytest.mark.parametrize(
    ("at", "value", "field"),
    [
        (0, 0x02, "LI"),
        (1, 0x41, "TI"),
        (2, 0xA2, "SI"),
        (4, 0x81, "common header tag"),
        (15, 0x01, "version"),
        (3, 0x19, "session header length"),
        (5, 0x11, "common header length"),
        (9, 0x7D, "SPDU length"),
        (26, 0x05, "IV length"),
        (29, 0x69, "payload length"),
        (31, 0x82, "type"),
        (32, 0x02, "simulation"),
        (37, 0x62, "goosePdu"),
        (36, 0x70, "APDU length"),
    ],
)
def test_malformed_fields_are_named_with_their_offset(at: int, value: int, field: str) -> None:
    bad = bytearray(UNSECURED)
    bad[at] = value
    with pytest.raises(BadSpdu) as exc:
        decode(bytes(bad))
    assert exc.value.path == field
    assert exc.value.offset is not None and exc.value.offset <= at + 4
    assert field in str(exc.value) and "offset" in str(exc.value)


def test_every_truncation_is_an_error_never_a_crash() -> None:
    for buf in (UNSECURED, HMAC128, GCM128):
        for n in range(len(buf)):
            with pytest.raises(BadSpdu):
                decode(buf[:n])


def test_encode_reproduces_libiec61850_byte_for_byte() -> None:
    assert encode(decode(UNSECURED).apdus, 0, layout="libiec61850") == UNSECURED
    apdus = open_spdu(decode(HMAC128), key("hmac-sha256-128"))
    assert encode(apdus, 0, key=key("hmac-sha256-128"), layout="libiec61850") == HMAC128
    gcm = decode(GCM128)
    plain = open_spdu(gcm, key("aes-128-gcm"))
    assert encode(plain, 0, key=key("aes-128-gcm"), iv=gcm.iv, layout="libiec61850") == GCM128


@pytest.mark.parametrize(
    "alg", [None, "hmac-sha256-80", "hmac-sha256-128", "hmac-sha256-256", "aes-128-gcm"]
)
def test_encode_round_trips_in_the_consistent_layout(alg: str | None) -> None:
    apdus = (
        Apdu(0x3001, decode(UNSECURED).apdus[0].pdu, simulation=True),
        Apdu(0x0001, decode(UNSECURED).apdus[0].pdu),
    )
    k = key(alg) if alg else None
    iv = bytes(range(12)) if alg == "aes-128-gcm" else None
    buf = encode(apdus, 0xFFFFFFFF, key=k, iv=iv, time_of_current_key=7, time_to_next_key=-1)
    spdu = decode(buf)
    assert spdu.layout == "consistent"
    assert (spdu.spdu_number, spdu.time_of_current_key, spdu.time_to_next_key) == (
        0xFFFFFFFF,
        7,
        -1,
    )
    assert (open_spdu(spdu, k) if k else spdu.apdus) == apdus


def test_the_layer2_bridge_keeps_appid_simulation_and_pdu() -> None:
    a = Apdu(0x3001, decode(UNSECURED).apdus[0].pdu, simulation=True)
    frame = frame_of_apdu(a, DST, SRC)
    assert decode_frame(frame).reserved1 & 0x8000
    assert apdu_of_frame(frame + bytes(10)) == a


def test_gmac_keys_do_not_sign_rgoose() -> None:
    with pytest.raises(ValueError, match="HMAC or encrypts"):
        encode(decode(UNSECURED).apdus, 0, key=key("aes-gmac-128"))
