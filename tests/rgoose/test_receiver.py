"""R-GOOSE through the same hub, gates and policy as Layer 2 (virtual clock): what a
`required` subscription takes from SPDUs, what it refuses and counts, the SPDU number's
replay rule, and libiec61850's SPDUs judged with a real key file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.goose.rgoose import feed, judge_spdu, receiver_for, serial_ahead
from goosectl.protocols.rgoose import apdu_of_frame, encode
from tests.goose.helpers import DST, GOCB, MS, UTC0, raw_frame
from tests.goose.keyfiles import S, keyfile
from tests.rgoose.vectors import GCM128, HMAC128, MATERIAL, UNSECURED, key

SECRET = bytes(range(1, 33))


def _keys(tmp: Path, material: bytes = MATERIAL) -> KeyFile:
    window = {"not_before": UTC0 - 3600 * S, "not_after": UTC0 + 3600 * S}
    return keyfile(
        tmp,
        [
            {"key_id": 1, "algorithm": "hmac-sha256-128", "secret": material, **window},
            {"key_id": 2, "algorithm": "aes-128-gcm", "secret": material, **window},
            {"key_id": 7, "algorithm": "hmac-sha256-256", "secret": SECRET, **window},
        ],
    )


def _hub(kf: KeyFile, policy: str = "required") -> tuple[GooseHub, Any]:
    subs = [{"gocb_ref": GOCB, "appid": 0x1010, "dst": DST, "auth": policy}]
    cfg = GooseConfig.model_validate({"subscriptions": subs})
    hub = GooseHub(cfg, keys=kf)
    hub.set_utc_offset(UTC0)
    hub.start(0, UTC0)
    return hub, receiver_for(hub, cfg.subscriptions, kf)


def _spdu(
    st: int, number: int, *, key_id: int | None = 7, secret: bytes = SECRET, **kw: Any
) -> bytes:
    apdu = apdu_of_frame(raw_frame(st, 0, **kw))
    if key_id is None:
        return encode([apdu], number)
    alg = "aes-128-gcm" if key_id == 2 else "hmac-sha256-256"
    iv = bytes(11) + bytes((number & 0xFF,)) if key_id == 2 else None
    return encode([apdu], number, key=key(alg, key_id, secret), iv=iv)


def _run(hub: GooseHub, rx: Any, spdu: bytes, t_ns: int, sender: str = "10.0.0.1") -> list[Any]:
    """(cls, deliver, first value) of each frame the hub judged for one SPDU."""
    out = []
    for _, effects in feed(hub, rx, spdu, sender, t_ns, UTC0 + t_ns):
        for e in effects:
            if type(e).__name__ == "FrameClassified":
                out.append((e.cls, e.deliver, e.values[0].value if e.values else None))
    return out


def test_a_signed_trip_is_delivered_and_forgeries_are_refused_per_reason(tmp_path) -> None:
    kf = _keys(tmp_path)
    hub, rx = _hub(kf)
    assert _run(hub, rx, _spdu(1, 1), 10 * MS)[0][1] is True
    trip = {"values": (True, False)}
    forged = {
        "unsigned": _spdu(2, 2, key_id=None, **trip),
        "bad_mac": _spdu(2, 3, secret=bytes(32), **trip),
        "unknown_key": encode(
            [apdu_of_frame(raw_frame(2, 0, **trip))], 4, key=key("hmac-sha256-256", 9, SECRET)
        ),
    }
    for i, (reason, spdu) in enumerate(forged.items()):
        got = _run(hub, rx, spdu, (20 + i) * MS)
        assert [(c, d) for c, d, _ in got] == [("auth_refused", False)], reason
    counts = hub.counters()["auth"][GOCB]["counts"]
    assert {r: counts[r] for r in forged} == dict.fromkeys(forged, 1)
    # and the genuine trip still trips afterwards
    assert _run(hub, rx, _spdu(2, 5, **trip), 40 * MS) == [("new_state", True, True)]


def test_an_encrypted_trip_is_delivered_and_a_wrong_key_reads_nothing(tmp_path) -> None:
    hub, rx = _hub(_keys(tmp_path))
    assert _run(hub, rx, _spdu(1, 1, key_id=2, secret=MATERIAL), 10 * MS)[0][1] is True
    assert (
        _run(hub, rx, _spdu(2, 2, key_id=2, secret=bytes(16), values=(True, False)), 20 * MS) == []
    )
    assert rx.counters()["unreadable"] == 1


def test_an_spdu_number_that_does_not_advance_is_a_replay(tmp_path) -> None:
    hub, rx = _hub(_keys(tmp_path))
    trip = _spdu(2, 10, values=(True, False))
    assert _run(hub, rx, _spdu(1, 9), 10 * MS)[0][1] is True
    assert _run(hub, rx, trip, 20 * MS) == [("new_state", True, True)]
    # the same SPDU again, and a fresh stNum under an old SPDU number: refused before the hub
    assert _run(hub, rx, trip, 30 * MS) == []
    assert _run(hub, rx, _spdu(3, 8, values=(True, True)), 40 * MS) == []
    assert rx.counters()["spdu_replay"] == 2
    # a restarted publisher (SPDU number from 0, stNum 1, its first state stamped after its
    # last) after the TAL ran out is accepted
    late = 40 * MS + 2001 * MS
    assert _run(hub, rx, _spdu(1, 0, t_s=1_750_000_100), late)[0][1] is True


def test_a_forger_cannot_push_the_spdu_number_ahead(tmp_path) -> None:
    hub, rx = _hub(_keys(tmp_path))
    assert _run(hub, rx, _spdu(1, 5), 10 * MS)[0][1] is True
    _run(hub, rx, _spdu(2, 0x7FFFFFFF, key_id=None, values=(True, False)), 20 * MS)
    assert _run(hub, rx, _spdu(2, 6, values=(True, False)), 30 * MS) == [("new_state", True, True)]


def test_malformed_spdus_are_counted_never_raised(tmp_path) -> None:
    hub, rx = _hub(_keys(tmp_path))
    good = _spdu(1, 1)
    for n in range(len(good)):
        assert _run(hub, rx, good[:n], 10 * MS) == []
    assert rx.counters()["bad_spdu"] == len(good)
    assert rx.last_error is not None and "offset" in str(rx.last_error)


@pytest.mark.parametrize(
    ("buf", "material", "want"),
    [
        (UNSECURED, MATERIAL, ("unsigned", None)),
        (HMAC128, MATERIAL, ("verified", None)),
        (HMAC128, bytes(range(1, 17)), ("refused", "bad_mac")),
    ],
)
def test_libiec61850_spdus_with_a_key_file(tmp_path, buf, material, want) -> None:
    kf = _keys(tmp_path, material)
    verdict, _, apdus = judge_spdu(buf, kf, UTC0)
    assert (verdict.status, verdict.reason) == want
    assert [a.appid for a in apdus] == [0x3001]


def test_libiec61850_gcm_spdu_with_a_key_file(tmp_path) -> None:
    window = {"not_before": UTC0 - 3600 * S, "not_after": UTC0 + 3600 * S}
    gcm = keyfile(
        tmp_path, [{"key_id": 1, "algorithm": "aes-128-gcm", "secret": MATERIAL, **window}]
    )
    verdict, _, apdus = judge_spdu(GCM128, gcm, UTC0)
    assert (verdict.status, verdict.algorithm, len(apdus)) == ("verified", "aes-128-gcm", 1)
    # key 1 an HMAC key: the encrypted SPDU does not verify under it
    assert judge_spdu(GCM128, _keys(tmp_path), UTC0)[0].reason == "bad_mac"
    wrong = [{"key_id": 1, "algorithm": "aes-128-gcm", "secret": bytes(16), **window}]
    assert judge_spdu(GCM128, keyfile(tmp_path, wrong), UTC0)[0].reason == "bad_mac"
    other = keyfile(
        tmp_path, [{"key_id": 2, "algorithm": "aes-128-gcm", "secret": MATERIAL, **window}]
    )
    verdict, _, apdus = judge_spdu(GCM128, other, UTC0)
    assert (verdict.status, verdict.reason, apdus) == ("refused", "unknown_key", ())


def test_serial_arithmetic_across_the_wrap() -> None:
    assert serial_ahead(0, 0xFFFFFFFF) and serial_ahead(5, 4)
    assert not serial_ahead(4, 4) and not serial_ahead(3, 4) and not serial_ahead(0x80000004, 4)
