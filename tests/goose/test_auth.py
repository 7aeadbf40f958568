"""The IEC 62351-6 gate on a real publisher and subscriber (virtual clock): what a
`required` subscription lets through, what it refuses and counts, and that a refused frame
moves nothing of its stream (no delivery, no stNum, no TAL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.goose.auth import EVENT_EVERY_NS, SecurityEvent
from goosectl.controller.goose.effects import StreamState
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.goose.security import ALGORITHMS, PROFILES, MacKey, parse, sign
from tests.goose.helpers import (
    DST,
    GOCB,
    MS,
    UTC0,
    Wire,
    frames,
    pub_cfg,
    raw_frame,
    verdicts,
)
from tests.goose.keyfiles import S, keyfile
from tests.support.examples import examples

SECRET = bytes(range(1, 33))
OTHER = bytes(range(101, 133))


def keys(tmp: Path, alg: str = "hmac-sha256-128", **extra: Any) -> KeyFile:
    entries = [
        {
            "key_id": 7,
            "algorithm": alg,
            "secret": SECRET[:16] if ALGORITHMS[alg].gmac else SECRET,
            "not_before": UTC0 - 3600 * S,
            "not_after": UTC0 + 3600 * S,
            "chain": "bay",
        },
        {  # expired an hour before the test's time, grace included
            "key_id": 9,
            "algorithm": alg,
            "secret": SECRET[:16] if ALGORITHMS[alg].gmac else SECRET,
            "not_before": UTC0 - 7200 * S,
            "not_after": UTC0 - 3600 * S,
        },
    ]
    entries += extra.get("more", [])
    return keyfile(tmp, entries)


def pub_hub(kf: KeyFile | None, profile: str = "length-crc", **kw: Any) -> GooseHub:
    cfg = GooseConfig.model_validate(
        {"publishers": [pub_cfg(auth="sign", key_id=7, **kw)], "auth_profile": profile}
    )
    hub = GooseHub(cfg, keys=kf)
    hub.set_utc_offset(UTC0)
    return hub


def sub_hub(kf: KeyFile | None, policy: str = "required", profile: str = "length-crc") -> GooseHub:
    cfg = GooseConfig.model_validate(
        {
            "subscriptions": [{"gocb_ref": GOCB, "appid": 0x1010, "dst": DST, "auth": policy}],
            "auth_profile": profile,
        }
    )
    hub = GooseHub(cfg, keys=kf)
    hub.set_utc_offset(UTC0)
    return hub


def delivered(log: list) -> list[tuple]:
    return [tuple(x.value for x in v.values) for v in verdicts(log) if v.deliver]


def auth_counts(hub: GooseHub) -> dict[str, int]:
    return hub.counters()["auth"][GOCB]["counts"]


def signed_raw(st: int, sq: int, key_id: int = 7, secret: bytes = SECRET, **kw: Any) -> bytes:
    k = MacKey(key_id, ALGORITHMS["hmac-sha256-128"], secret)
    return sign(raw_frame(st, sq, **kw), k, PROFILES["length-crc"])


@pytest.mark.parametrize("alg", sorted(ALGORITHMS))
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_signed_publisher_reaches_a_required_subscriber(tmp_path, alg, profile) -> None:
    kf = keys(tmp_path, alg)
    w = Wire(pub_hub(kf, profile), sub_hub(kf, "required", profile))
    w.run_until(50 * MS)
    w.publish(True, False)
    w.run_until(2000 * MS)
    assert delivered(w.log) == [(False, False), (True, False)]
    counts = auth_counts(w.sub)
    assert counts["verified"] > 5  # retransmissions are signed and verified too
    assert set(counts) == {"verified"}
    stream = next(iter(w.sub.counters()["streams"].values()))
    assert stream["counts"]["retransmission"] > 3
    assert stream["lgos"]["St"] is True


def test_retransmissions_of_a_hmac_stream_stay_on_the_fast_path(tmp_path) -> None:
    """A verified repeat is the publisher's unsigned frame to the subscriber: the fast path
    counts it (same reports as the unsigned stream)."""
    kf = keys(tmp_path)
    w = Wire(pub_hub(kf), sub_hub(kf))
    w.run_until(3000 * MS)
    bank = w.sub.bank
    stream = next(iter(bank.streams.values()))
    assert stream.armed
    assert stream.counts["retransmission"] >= 3


def _forgeries(tmp_path) -> dict[str, bytes]:
    """A trip (stNum 2, first member TRUE) five ways a forger could send it."""
    trip = dict(values=(True, False))
    good = signed_raw(2, 0, **trip)
    truncated = good[:-4]
    malformed = bytearray(good)
    malformed[len(raw_frame(2, 0, **trip)) + 4] = 0x90  # Version's tag
    return {
        "unsigned": raw_frame(2, 0, **trip),
        "unknown_key": signed_raw(2, 0, key_id=8, **trip),
        "expired_key": signed_raw(2, 0, key_id=9, **trip),
        "bad_mac": signed_raw(2, 0, secret=OTHER, **trip),
        "bad_extension": bytes(malformed),
        "bad_extension_truncated": truncated,
    }


def test_forged_trips_never_trip_and_are_counted_per_reason(tmp_path) -> None:
    kf = keys(tmp_path)
    w = Wire(pub_hub(kf), sub_hub(kf))
    w.run_until(50 * MS)
    for buf in _forgeries(tmp_path).values():
        w.log += w.sub.frame(buf, "A", w.now)
    w.run_until(3000 * MS)
    assert delivered(w.log) == [(False, False)]
    counts = auth_counts(w.sub)
    assert counts["unsigned"] == 1
    assert counts["unknown_key"] == 1
    assert counts["expired_key"] == 1
    assert counts["bad_mac"] == 1
    assert counts["bad_extension"] == 2
    lgos = next(iter(w.sub.counters()["streams"].values()))["lgos"]
    assert lgos["refused"]["auth_bad_mac"] == 1
    assert lgos["LastStNum"] == 1  # the forged stNum 2 never reached the stream
    refusals = [v for v in verdicts(w.log) if v.cls == "auth_refused"]
    assert sorted(v.refused for v in refusals) == sorted(
        f"auth_{r}"
        for r in ("unsigned", "unknown_key", "expired_key", "bad_mac") + ("bad_extension",) * 2
    )


def test_every_single_octet_flip_of_a_signed_trip_is_refused(tmp_path) -> None:
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    first = signed_raw(1, 0)
    hub.frame(first, "A", 0)
    trip = signed_raw(2, 0, values=(True, False))
    refused = 0
    for i in range(12, len(trip)):  # the addresses are the filters' business
        bad = bytearray(trip)
        bad[i] ^= 0x01
        out = hub.frame(bytes(bad), "A", MS)
        assert not any(v.deliver for v in verdicts(out)), f"octet {i} flipped delivered"
        refused += 1
    # a flip in APPID or gocbRef makes it a frame of no subscription (unmatched, or
    # malformed where the gocbRef's tag or length no longer parse)
    auth_refused = sum(n for k, n in auth_counts(hub).items() if k != "verified")
    c = hub.counters()
    assert auth_refused + c["unmatched"] + c["malformed"] == refused
    assert auth_refused > 100
    # and the genuine trip still trips afterwards
    assert [v.deliver for v in verdicts(hub.frame(trip, "A", 2 * MS))] == [True]


def test_forgeries_do_not_keep_a_dead_stream_alive(tmp_path) -> None:
    """The publisher stops; forged frames keep coming: the stream is lost exactly one TAL
    after the last genuine frame, as without them."""
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    hub.frame(signed_raw(1, 0, tal=100), "A", 0)
    lost_at = None
    for t in range(10, 300, 10):
        out = hub.advance(t * MS)
        out += hub.frame(raw_frame(1, t // 10, tal=100), "A", t * MS)
        out += hub.frame(signed_raw(1, t // 10, secret=OTHER, tal=100), "A", t * MS)
        if lost_at is None and any(type(e) is StreamState and e.state == "lost" for e in out):
            lost_at = t
    assert lost_at == 100


def test_optional_accepts_unsigned_and_refuses_bad_signatures(tmp_path) -> None:
    kf = keys(tmp_path)
    hub = sub_hub(kf, "optional")
    assert [v.deliver for v in verdicts(hub.frame(raw_frame(1, 0), "A", 0))] == [True]
    out = hub.frame(signed_raw(2, 0, secret=OTHER, values=(True, False)), "A", MS)
    assert [v.cls for v in verdicts(out)] == ["auth_refused"]
    out = hub.frame(signed_raw(2, 0, values=(True, False)), "A", 2 * MS)
    assert [v.deliver for v in verdicts(out)] == [True]
    assert auth_counts(hub) == {"unsigned_accepted": 1, "bad_mac": 1, "verified": 1}


def test_a_flood_of_refusals_is_one_security_event_per_interval(tmp_path) -> None:
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    events: list[SecurityEvent] = []
    for i in range(2000):  # 2,000 forgeries over 2 s
        out = hub.frame(signed_raw(1, i, secret=OTHER), "A", i * MS)
        events += [e for e in out if type(e) is SecurityEvent]
    assert len(events) == 2000 * MS // EVENT_EVERY_NS
    assert events[0].count == 1 and events[1].count == 1000
    assert {e.reason for e in events} == {"bad_mac"}
    assert auth_counts(hub)["bad_mac"] == 2000


def test_key_rollover_mid_burst_delivers_every_change_once(tmp_path) -> None:
    """Key 7 ends and key 8 (same chain) begins in the middle of a burst of changes: the
    publisher switches key ids, the subscriber verifies both, nothing lost or doubled."""
    switch = UTC0 + 500 * MS
    entries = [
        {
            "key_id": 7,
            "algorithm": "hmac-sha256-128",
            "secret": SECRET,
            "not_before": UTC0 - 3600 * S,
            "not_after": switch + 200 * MS,
            "chain": "bay",
        },
        {
            "key_id": 8,
            "algorithm": "hmac-sha256-128",
            "secret": OTHER,
            "not_before": switch,
            "not_after": UTC0 + 3600 * S,
            "chain": "bay",
        },
    ]
    kf = keyfile(tmp_path, entries, grace_s=0.1)
    w = Wire(pub_hub(kf), sub_hub(kf))
    changes = []
    for i in range(20):  # a change every 50 ms across the switch
        w.run_until((i + 1) * 50 * MS)
        v = (bool(i % 2), bool(i % 3))
        changes.append(v)
        w.publish(*v)
    w.run_until(3000 * MS)
    got = delivered(w.log)[1:]
    assert got == changes
    assert set(auth_counts(w.sub)) == {"verified"}
    assert w.sub.counters()["auth"][GOCB]["key_id"] == 8


def test_a_publisher_without_a_key_in_force_sends_nothing(tmp_path) -> None:
    kf = keys(tmp_path)  # key 9 expired an hour ago
    cfg = GooseConfig.model_validate({"publishers": [pub_cfg(auth="sign", key_id=9)]})
    hub = GooseHub(cfg, keys=kf)
    hub.set_utc_offset(UTC0)
    out = hub.start(0, UTC0)
    assert frames(out) == []
    assert hub.counters()["signed"][GOCB] == {"signed": 0, "no_key": 1}


def test_reloaded_keys_take_effect_on_the_next_frame(tmp_path) -> None:
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    assert verdicts(hub.frame(signed_raw(1, 0), "A", 0))[0].deliver
    hub.frame(signed_raw(1, 1), "A", MS)
    hub.set_keys(KeyFile("empty", {}, 0))
    out = hub.frame(signed_raw(1, 2), "A", 2 * MS)
    assert [v.refused for v in verdicts(out)] == ["auth_unknown_key"]


def test_gmac_ivs_never_repeat_and_start_with_the_process_prefix(tmp_path) -> None:
    kf = keys(tmp_path, "aes-gmac-128")
    hub = pub_hub(kf)
    hub.set_iv_prefix(b"\xaa" * 6)
    w = Wire(hub, sub_hub(kf))
    w.run_until(3000 * MS)
    ivs = []
    profile = PROFILES["length-crc"]
    for _ in range(20):
        w.publish(True, False)
        w.run_until(w.now + 20 * MS)
    sent = [f.data for f in frames(hub.advance(w.now + 5000 * MS))]  # the heartbeats
    assert len(sent) >= 3
    signer = next(iter(hub.signers.values()))
    assert signer.counter > 40  # every frame, retransmissions too, took a fresh IV
    for data in sent:
        ext = parse(data, profile)
        assert ext is not None and ext.iv is not None
        ivs.append(ext.iv)
    assert all(iv.startswith(b"\xaa" * 6) for iv in ivs)
    assert len(set(ivs)) == len(ivs)
    assert set(auth_counts(w.sub)) == {"verified"}


def test_status_shows_the_auth_counters(tmp_path) -> None:
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    hub.frame(raw_frame(1, 0), "A", 0)
    c = hub.counters()["auth"][GOCB]
    assert c["policy"] == "required" and c["state"] == "refusing" and c["counts"] == {"unsigned": 1}


def test_the_remembered_header_judges_every_frame_as_the_full_check(tmp_path) -> None:
    """The gate's fast path (a header already verified: no parse, the remembered layout)
    is a compiled view of the full check: for any frame, flipped, cut, padded, at any
    time across the keys' windows, a gate that remembers the stream's header returns what
    a gate that has seen nothing returns, with the same verdict."""
    kf = keys(tmp_path)
    warm = sub_hub(kf).bank.auth
    assert warm is not None
    warm.check(signed_raw(1, 0), 0)
    assert warm.fast  # the header is remembered
    bases = [signed_raw(1, 1), signed_raw(2, 0, values=(True, False)), signed_raw(1, 1, key_id=9)]

    agrees_with_the_full_check(warm, kf, bases)


def test_a_replayed_signed_trip_does_nothing_and_a_restarted_publisher_is_accepted(
    tmp_path,
) -> None:
    """Genuine signed frames sent again verify (they are genuine); the receive rules
    refuse them: the same trip frame, and a frame with the next stNum but an old `t`. A
    publisher restarted after the TAL ran out is accepted."""
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    t0 = 1_750_000_000
    assert [v.deliver for v in verdicts(hub.frame(signed_raw(1, 0, t_s=t0), "A", 0))] == [True]
    trip = signed_raw(2, 0, t_s=t0 + 1, values=(True, False))
    assert [v.deliver for v in verdicts(hub.frame(trip, "A", MS))] == [True]
    again = verdicts(hub.frame(trip, "A", 2 * MS))
    assert [(v.deliver, v.cls) for v in again] == [(False, "duplicate")]  # the last frame
    old_t = verdicts(hub.frame(signed_raw(3, 0, t_s=t0 - 600, values=(True, False)), "A", 3 * MS))
    assert [(v.deliver, v.cls) for v in old_t] == [(False, "stale")]
    hub.advance(10_000 * MS)  # the TAL (2 s) runs out: the stream is lost
    restarted = verdicts(hub.frame(signed_raw(1, 0, t_s=t0 + 20), "A", 10_001 * MS))
    assert [(v.deliver, v.cls) for v in restarted] == [(True, "restart")]
    assert set(auth_counts(hub)) == {"verified"}  # every frame verified: the rules refused


def test_the_remembered_gmac_header_judges_every_frame_as_the_full_check(tmp_path) -> None:
    """The same compiled view for an AES-GMAC stream, whose IV is new in every frame: the
    remembered extension is compared around the IV, so a frame with any IV, flipped, cut
    or padded, at any time across the keys' windows, gets the full check's frame and
    verdict; and a genuine retransmission with a new IV is verified without a parse."""
    kf = keys(tmp_path, "aes-gmac-128")
    warm = sub_hub(kf).bank.auth
    assert warm is not None

    def gmac_raw(st_num: int, sq: int, iv: int, key_id: int = 7, **kw: Any) -> bytes:
        k = MacKey(key_id, ALGORITHMS["aes-gmac-128"], SECRET[:16])
        return sign(raw_frame(st_num, sq, **kw), k, PROFILES["length-crc"], iv=iv.to_bytes(12))

    warm.check(gmac_raw(1, 0, 1), 0)
    assert warm.fast  # the header is remembered, the IV cut out
    nxt = gmac_raw(1, 1, 2)
    assert warm.check(nxt, 0) == raw_frame(1, 1) and warm.last is not None
    assert warm.last.status == "verified"
    bases = [gmac_raw(1, 2, 3), gmac_raw(2, 0, 4, values=(True, False)), gmac_raw(1, 3, 5, 9)]

    agrees_with_the_full_check(warm, kf, bases)


def agrees_with_the_full_check(warm: Any, kf: Any, bases: list[bytes]) -> None:
    """The property both remembered views hold: any of `bases`, flipped, cut or padded, at
    any time across the keys' windows, gets from the warm gate the frame and verdict a
    gate that has seen nothing gives."""

    @given(
        base=st.sampled_from(bases),
        flips=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=3),
        cut=st.integers(0, 8),
        pad=st.binary(max_size=6),
        now=st.integers(0, 2 * 3600 * S),
    )
    @settings(max_examples=examples(200), deadline=None, derandomize=True)
    def agree(base: bytes, flips: list, cut: int, pad: bytes, now: int) -> None:
        buf = bytearray(base)
        for pos, x in flips:
            buf[pos % len(buf)] ^= x
        frame = bytes(buf[: len(buf) - cut]) + pad
        fresh = sub_hub(kf).bank.auth
        assert fresh is not None
        want = fresh.check(frame, now)
        assert (warm.check(frame, now), warm.last) == (want, fresh.last)

    agree()


def test_a_genuine_frame_after_a_forgery_is_journaled_and_the_state_recovers(tmp_path) -> None:
    """One forged frame, then the genuine stream's repeats (the gate's remembered header,
    no parse): the first verified repeat steps the subscription's auth machine back to
    `verified` with its key id, as the docs promise ("the next verified frame is
    journaled"), so `status` and the page do not show `refusing` for ever after a
    single forgery, and the trip reflex, which arms only a policy at its key id, is
    armed again."""
    kf = keys(tmp_path)
    hub = sub_hub(kf)
    hub.frame(signed_raw(1, 0), "A", 0)
    hub.frame(signed_raw(1, 1), "A", MS)  # the header is remembered: the fast path
    c = hub.counters()["auth"][GOCB]
    assert c["state"] == "verified" and c["key_id"] == 7
    hub.frame(signed_raw(1, 2, secret=OTHER), "A", 2 * MS)
    assert hub.counters()["auth"][GOCB]["state"] == "refusing"
    out = hub.frame(signed_raw(1, 3), "A", 3 * MS)
    c = hub.counters()["auth"][GOCB]
    assert c["counts"] == {"verified": 3, "bad_mac": 1}
    assert c["state"] == "verified" and c["key_id"] == 7, c
    (pol,) = hub.bank.auth.by_key.values()
    assert pol.key_id == 7
    assert out, "the genuine frame after the forgery was not delivered"
