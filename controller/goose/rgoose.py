"""R-GOOSE into the GOOSE machines: each SPDU's verdict, its APDUs as the Layer-2 frames the
subscriber already reads, and the SPDU number's replay rule.

R-GOOSE is another transport for the same hub, gates and policy: an SPDU is judged with the
key file's keys (`judge_spdu`, the same reasons as `auth.judge`), each goosePdu it carries
becomes the untagged frame a Layer-2 publisher would have sent (`frame_of_apdu`), and that
frame goes through `GooseHub.frame` with the SPDU's verdict carried to the auth gate
(`AuthGate.carried`), so `auth: off | optional | required` decides as for Layer 2.

The replay rule (IEC 62351-6 section 6.2, for R-GOOSE): while a stream is valid (within
the TAL of its last accepted frame), its SPDU number must advance (32-bit serial
arithmetic, RFC 1982); an SPDU that does not is refused (`spdu_replay`) before the hub sees
it. After the TAL has run out a restarted publisher is accepted from any number. Only an
SPDU the stream's policy would accept moves the number, so a forger cannot push it ahead of
the genuine publisher.

Pure: times are the caller's; UTC (for the keys' windows) is passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from goosectl.controller.config.goose import SubscriptionCfg
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.goose.auth import UNSIGNED, Verdict, in_force
from goosectl.protocols.goose import GooseError, parse_header
from goosectl.protocols.rgoose import PORT, Apdu, BadSpdu, Spdu, SpduRefused, decode, open_spdu
from goosectl.protocols.rgoose.spdu import frame_of_apdu, unverified_apdus
from goosectl.protocols.rgoose.udp import Datagram, datagram

#: the destination MAC of a frame made from an APDU of no configured subscription
DEFAULT_DST: Final = bytes.fromhex("010ccd010000")
#: refusals of the receiver itself, before any subscription is known: reason -> meaning
REASONS: Final = {
    "bad_spdu": "an SPDU that is truncated or malformed",
    "spdu_replay": "an SPDU number that does not advance while the stream is valid",
    "unreadable": "an encrypted SPDU that no key of the key file decrypts",
}


def spdu_datagram(frame: bytes) -> Datagram | None:
    """The UDP datagram of a captured Ethernet frame when it is R-GOOSE's (port 102 and a
    CLTP unit data header), else None."""
    d = datagram(frame)
    if d is None or PORT not in (d.sport, d.dport) or d.payload[:2] != b"\x01\x40":
        return None
    return d


def source_mac(ip: str) -> bytes:
    """A locally administered MAC standing for an IPv4 sender, so that the subscriber's
    source learning tells R-GOOSE senders apart as it tells Layer-2 ones apart."""
    return b"\x02\x00" + bytes(int(x) for x in ip.split("."))


def judge_spdu(
    payload: bytes, keys: KeyFile | None, utc_ns: int
) -> tuple[Verdict, Spdu | None, tuple[Apdu, ...]]:
    """One SPDU's verdict (the auth gate's statuses and reasons), the decoded SPDU and the
    APDUs that can be read: all of them once verified or unsecured, those of an HMAC-signed
    SPDU that did not verify (for the subscription's policy to count), none of an encrypted
    SPDU that did not decrypt. `BadSpdu` propagates: a malformed SPDU has no subscription."""
    spdu = decode(payload)
    if not spdu.secured:
        return UNSIGNED, spdu, spdu.apdus
    key = keys.keys.get(spdu.key_id) if keys is not None else None
    if key is None or keys is None:
        return Verdict("refused", "unknown_key", spdu.key_id), spdu, _unverified(spdu)
    reason = in_force(key, keys.grace_ns, utc_ns)
    if reason is not None:
        return Verdict("refused", reason, spdu.key_id, key.algorithm), spdu, _unverified(spdu)
    try:
        apdus = open_spdu(spdu, key.key)
    except SpduRefused:
        return Verdict("refused", "bad_mac", spdu.key_id, key.algorithm), spdu, _unverified(spdu)
    return Verdict("verified", None, spdu.key_id, key.algorithm), spdu, apdus


def _unverified(spdu: Spdu) -> tuple[Apdu, ...]:
    """The APDUs of a secured SPDU read without its key: plaintext unless encrypted (an IV
    in the header), and only if they parse."""
    try:
        return unverified_apdus(spdu)
    except BadSpdu:
        return ()


def serial_ahead(new: int, old: int) -> bool:
    """Whether 32-bit `new` comes after `old` (RFC 1982): less than half the space ahead."""
    return 0 < (new - old) & 0xFFFFFFFF < 0x80000000


@dataclass(frozen=True, slots=True)
class Received:
    """One APDU of an SPDU, ready for the hub: the Layer-2 frame and the SPDU's verdict."""

    frame: bytes
    verdict: Verdict
    spdu_number: int
    key_id: int


class RgooseReceiver:
    """SPDUs -> `Received` frames for the hub, with the replay rule and counters.

    `dst_of(appid, gocb_ref)` gives the destination MAC of the subscription an APDU
    belongs to (the hub's subscriptions match on it); `mode_of(frame)` the auth policy
    that will judge the frame (`off` when the hub has no gate)."""

    def __init__(
        self,
        keys: KeyFile | None,
        dst_of: Callable[[int, str], bytes] | None = None,
        mode_of: Callable[[bytes], str] | None = None,
    ) -> None:
        self.keys = keys
        self.dst_of = dst_of or (lambda appid, ref: DEFAULT_DST)
        self.mode_of = mode_of or (lambda frame: "off")
        #: (sender, APPID, gocbRef) -> (last accepted SPDU number, valid until ns)
        self.last: dict[tuple[str, int, str], tuple[int, int]] = {}
        self.counts: Counter[str] = Counter()
        self.last_error: BadSpdu | None = None

    def receive(self, payload: bytes, sender: str, now_ns: int, utc_ns: int) -> list[Received]:
        """The frames of one datagram's SPDU that may go on to the hub; a malformed,
        unreadable or replayed SPDU is counted here and yields nothing (never raises)."""
        self.counts["spdus"] += 1
        try:
            verdict, spdu, apdus = judge_spdu(payload, self.keys, utc_ns)
        except BadSpdu as exc:
            self.counts["bad_spdu"] += 1
            self.last_error = exc
            return []
        assert spdu is not None
        if not apdus:
            self.counts["unreadable"] += 1
            return []
        out: list[Received] = []
        src = source_mac(sender)
        for a in apdus:
            try:
                ref, tal = _ref_and_tal(a)
            except GooseError as exc:
                self.counts["bad_spdu"] += 1
                self.last_error = BadSpdu(exc.reason, offset=exc.offset, path="goosePdu")
                continue
            frame = frame_of_apdu(a, self.dst_of(a.appid, ref), src)
            accepted = verdict.status == "verified" or (
                (mode := self.mode_of(frame)) == "off"
                or (mode == "optional" and verdict.status == "unsigned")
            )
            if accepted:
                key = (sender, a.appid, ref)
                prev = self.last.get(key)
                if (
                    prev is not None
                    and now_ns <= prev[1]
                    and not serial_ahead(spdu.spdu_number, prev[0])
                ):
                    self.counts["spdu_replay"] += 1
                    continue
                self.last[key] = (spdu.spdu_number, now_ns + tal * 1_000_000)
            out.append(Received(frame, verdict, spdu.spdu_number, spdu.key_id))
        return out

    def counters(self) -> dict[str, Any]:
        return dict(self.counts)


def _ref_and_tal(a: Apdu) -> tuple[str, int]:
    """gocbRef and timeAllowedtoLive (ms) of an APDU's goosePdu (`GooseError` if bad)."""
    head = parse_header(frame_of_apdu(a, DEFAULT_DST, bytes(6)))
    return head.gocb_ref, head.time_allowed_to_live


def receiver_for(
    hub: Any, subscriptions: list[SubscriptionCfg], keys: KeyFile | None
) -> RgooseReceiver:
    """A receiver whose frames reach `hub`'s subscriptions (by APPID and gocbRef) and
    whose replay rule asks `hub`'s auth gate for each frame's policy."""
    dst = {(s.appid, s.gocb_ref): s.dst for s in subscriptions}
    gate = hub.bank.auth

    def dst_of(appid: int, ref: str) -> bytes:
        return dst.get((appid, ref), DEFAULT_DST)

    def mode_of(frame: bytes) -> str:
        return gate.policy(frame).mode if gate is not None else "off"

    return RgooseReceiver(keys, dst_of, mode_of)


def feed(
    hub: Any,
    receiver: RgooseReceiver,
    payload: bytes,
    sender: str,
    now_ns: int,
    utc_ns: int,
    side: str = "A",
) -> list[tuple[Received, list[Any]]]:
    """One datagram's SPDU through `hub` (a `GooseHub`, or anything with its `bank` and
    `frame`: the live shell's injector): each frame it may deliver, with the effects the
    hub returned for it (one `FrameClassified` each, as for a Layer-2 frame)."""
    gate = hub.bank.auth
    out = []
    for r in receiver.receive(payload, sender, now_ns, utc_ns):
        if gate is not None:
            gate.carried = r.verdict
        out.append((r, hub.frame(r.frame, side, now_ns)))
    return out
