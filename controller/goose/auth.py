"""The authentication gate (IEC 62351-6): which frames may go on to the stream machines.

It runs where frames enter the subscriber (`SubscriberBank.on_frame`), before the fast
path, the stream lookup and source learning: a frame a subscription's policy refuses
changes nothing of its stream, so it cannot reach the logic, cannot refresh the TAL (a
forger cannot keep a dead stream alive) and cannot teach the stream a source. A verified
frame goes on as the publisher's unsigned frame (`Extension.unsigned`), so everything
after the gate (the fast path included) reads exactly what it reads without security.

Policy per subscription (`auth:`):

- ``off``: nothing checked (the frame goes on as received);
- ``optional``: a signed frame must verify, an unsigned one goes on and is reported;
- ``required``: only a verified frame goes on (fails closed: until one verifies, the
  subscription's inputs keep their fail-safe values, as before any first frame).

The key is chosen by the frame's key id among the keys of the key file; its algorithm is
the key entry's, never the frame's. A key is in force from `not_before - grace` to
`not_after + grace`, so current, next and previous keys overlap during a rollover.

Pure: the time is the caller's; UTC (for the keys' windows) is `now_ns + utc_offset_ns`,
the offset set by the shell (0 in a replay, whose times are the capture's UTC).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

from goosectl.controller.config.goose import SubscriptionCfg
from goosectl.controller.config.keys import Key, KeyFile
from goosectl.controller.engine import Scheduler, Table
from goosectl.controller.engine.effects import Effect
from goosectl.controller.engine.registry import Registry
from goosectl.controller.engine.resources import shipped
from goosectl.controller.goose.fastpath import stream_key
from goosectl.protocols.goose import GooseError
from goosectl.protocols.goose.ber import encode_signed
from goosectl.protocols.goose.security import (
    DEFAULT_PROFILE,
    IV_LEN,
    PROFILES,
    HeaderProfile,
    MacKey,
    parse,
    sign,
)

REGISTRY = Registry("goose-auth")
TABLE_PATH = shipped("goosectl.controller.goose", "tables", "auth.yaml")
POLICIES = ("off", "optional", "required")
#: refusal reason -> what it means (counted per reason, shown in `status` and the LGOS view)
REASONS: dict[str, str] = {
    "unsigned": "no security extension where the policy requires one",
    "bad_extension": "a security extension that is truncated or malformed",
    "unknown_key": "signed with a key id the key file does not hold",
    "expired_key": "signed with a key past its not_after (and the grace window)",
    "early_key": "signed with a key before its not_before (and the grace window)",
    "bad_mac": "the MAC does not verify",
}
#: verified headers (the octets through gocbRef) the gate remembers (`AuthGate.fast`):
#: a stream's new states and retransmissions differ in Length (TAL's width), so a stream
#: has a few; full, it starts again (a forger cannot add one: only verified frames do)
MAX_KNOWN = 64
#: at most one security event per subscription this often; refusals between are counted
EVENT_EVERY_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class SecurityEvent(Effect):
    """Frames of a subscription refused by its policy: `count` since the previous event,
    the last one's `reason` (and key id, when the frame named one)."""

    stream: str
    reason: str
    count: int
    key_id: int | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the gate made of one frame: `status` verified, unsigned or refused."""

    status: str
    reason: str | None = None
    key_id: int | None = None
    algorithm: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The `auth` member of `decode --json` / `listen --json`."""
        out: dict[str, Any] = {"status": self.status}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.key_id is not None:
            out["key_id"] = self.key_id
        if self.algorithm is not None:
            out["algorithm"] = self.algorithm
        return out


UNSIGNED = Verdict("unsigned")
#: `AuthGate.fast`'s entries: policy, EtherType offset, end of gocbRef, end of the APDU,
#: the extension through the mAC's tag and length octets, the end of the
#: AuthenticationValue, the extension's end, the key, the verdicts verified and bad_mac,
#: the key's window (grace included), the unsigned frame's octets through gocbRef; for a
#: GMAC key the IV content's offset (0: HMAC, no IV) and the octets after the IV through
#: the mAC's tag and length (the extension's octets before the IV are then the fifth item)
Known = tuple[
    "Policy", int, int, int, bytes, int, int, MacKey, Verdict, Verdict, int, int, bytes, int, bytes
]
_REFUSED = {r: Verdict("refused", r) for r in REASONS}


def in_force(key: Key, grace_ns: int, utc_ns: int) -> str | None:
    """None if the key may be used at `utc_ns`, else the refusal reason."""
    if utc_ns > key.not_after_ns + grace_ns:
        return "expired_key"
    if utc_ns < key.not_before_ns - grace_ns:
        return "early_key"
    return None


def judge(
    buf: bytes, keys: KeyFile | None, profile: HeaderProfile, utc_ns: int
) -> tuple[Verdict, bytes]:
    """One frame's verdict with every check, and the frame the receive path reads (the
    publisher's unsigned frame once verified, else `buf`)."""
    try:
        ext = parse(buf, profile)
    except GooseError:
        return _REFUSED["bad_extension"], buf
    if ext is None:
        return UNSIGNED, buf
    key = keys.keys.get(ext.key_id) if keys is not None else None
    if key is None:
        return Verdict("refused", "unknown_key", ext.key_id), buf
    reason = in_force(key, keys.grace_ns, utc_ns) if keys is not None else None
    if reason is not None:
        return Verdict("refused", reason, ext.key_id, key.algorithm), buf
    if not key.key.check(ext.domain, ext.iv, ext.mac):
        return Verdict("refused", "bad_mac", ext.key_id, key.algorithm), buf
    return Verdict("verified", None, ext.key_id, key.algorithm), ext.unsigned


class Policy:
    """One subscription's policy, counters and the memory of its last verified extension."""

    __slots__ = (
        "counts",
        "key",
        "key_id",
        "last_event",
        "machine",
        "mode",
        "pending",
        "signed",
        "stream",
        "verified",
    )

    def __init__(self, stream: str, mode: str, key: tuple[bytes, int, str] | None = None) -> None:
        self.stream = stream
        #: the subscription's (dst, APPID, gocbRef), None for the default policy
        self.key = key
        self.mode = mode
        self.counts: Counter[str] = Counter()
        self.machine: Any = None
        self.last_event: int | None = None
        self.pending = 0
        #: frames verified, and the key id of the last verified frame the auth machine was
        #: told of (None: tell it at the next one)
        self.verified = 0
        self.key_id: int | None = None
        #: the last Layer-2 frame that verified, as received: the extension the trip
        #: reflex expects on the next one (`controller/logic/reflex.py`)
        self.signed: bytes | None = None


@cache
def load_table() -> Table:
    """The auth table, loaded once per process (a `Table` is immutable)."""
    return Table.load(TABLE_PATH)


def policy_of(sub: SubscriptionCfg) -> str:
    return getattr(sub, "auth", None) or "off"


class AuthGate:
    """The policies of a bank's subscriptions; `check` is its one entry per frame."""

    def __init__(
        self,
        scheduler: Scheduler,
        subscriptions: list[SubscriptionCfg],
        keys: KeyFile | None,
        profile: str = DEFAULT_PROFILE,
        default: str = "off",
    ) -> None:
        self.scheduler = scheduler
        self.keys = keys
        self.profile = PROFILES[profile]
        self.utc_offset_ns = 0
        self.table = load_table()
        self.by_key: dict[bytes, Policy] = {}
        for sub in subscriptions:
            mode = policy_of(sub)
            if mode != "off":
                tlv = sub.gocb_ref.encode()
                key = sub.dst + sub.appid.to_bytes(2, "big") + b"\x80" + bytes((len(tlv),)) + tlv
                self.by_key[key] = Policy(sub.label, mode, sub.key)
        #: frames of no subscription with a policy (an observer's, `listen --keys`)
        self.default = Policy("*", default)
        #: the verdict of the last frame checked (for `listen --json`), None when unchecked,
        #: and the policy that judged it
        self.last: Verdict | None = None
        self.last_policy: Policy = self.default
        #: the verdict of the transport that carried the next frame (R-GOOSE: the SPDU's,
        #: `controller/goose/rgoose.py`), used once instead of judging a Layer-2 extension
        self.carried: Verdict | None = None
        #: the headers of verified HMAC frames -> what their successors are checked by
        #: (`check`)
        self.fast: dict[bytes, Known] = {}

    @property
    def active(self) -> bool:
        """Whether any frame would be checked at all (else the bank skips the gate)."""
        return bool(self.by_key) or self.default.mode != "off"

    def set_keys(self, keys: KeyFile | None) -> None:
        """A reloaded key file: from the next frame on, only its keys verify."""
        self.keys = keys
        self.fast.clear()

    def policy(self, buf: bytes) -> Policy:
        gk = stream_key(buf)
        if gk is None or len(buf) < 18:
            return self.default
        off = 16 if buf[12] == 0x81 and buf[13] == 0 else 12
        return self.by_key.get(buf[0:6] + buf[off + 2 : off + 4] + gk, self.default)

    def check(self, buf: bytes, now_ns: int) -> bytes | None:
        """The frame the subscriber reads (unsigned once verified), or None if refused.

        A frame behind a header already verified (the same octets through gocbRef, so the
        same subscription, Length and reserved fields) whose extension is that frame's but
        for the MAC (a retransmission, or a new state of the same length) is checked
        without a parse: the extension's layout, key and verdicts are the remembered
        frame's, the MAC is verified over a slice of the frame (a bytes slice: callgrind counts
        a memoryview and its slice as more work than copying a frame's domain). Anything
        else: `_check`."""
        if self.carried is None:
            try:  # the octets through gocbRef: the key of `fast` (as `stream_key` finds it)
                p = 26 if buf[12] == 0x81 and buf[13] == 0 else 22
                n = buf[p + 1]
                p += 2 if n < 0x80 else 2 + (n & 0x7F)
                known = self.fast.get(buf[: p + 2 + buf[p + 1]])
            except IndexError:
                known = None
            if known is not None:
                (pol, off, head_end, apdu_end, av, av_end, ext_end, key, ok, bad, lo, hi, head,
                 iv_at, post) = known  # fmt: skip
                if iv_at:  # GMAC: the extension the remembered one's but for the IV
                    same = buf[apdu_end:iv_at] == av and buf[iv_at + IV_LEN : av_end + 2] == post
                else:
                    same = buf[apdu_end : av_end + 2] == av
                if same and ext_end <= len(buf) and lo <= now_ns + self.utc_offset_ns <= hi:
                    self.last_policy = pol
                    domain, tag = buf[off:av_end], buf[av_end + 2 : ext_end]
                    if (
                        key.check_gmac(domain, buf[iv_at : iv_at + IV_LEN], tag)
                        if iv_at
                        else key.check_hmac(domain, tag)
                    ):
                        self.last = ok
                        pol.verified += 1
                        pol.signed = buf
                        if pol.key_id != ok.key_id:  # the first after a refusal event
                            self._verified_anew(pol, ok, now_ns)
                        if ext_end == len(buf):
                            return head + buf[head_end:apdu_end]
                        return head + buf[head_end:apdu_end] + buf[ext_end:]  # padding
                    self._refuse(pol, bad, now_ns)
                    return None
        return self._check(buf, now_ns)

    def _check(self, buf: bytes, now_ns: int) -> bytes | None:
        """Every check, the extension parsed strictly (`judge`)."""
        carried, self.carried = self.carried, None
        pol = self.policy(buf)
        self.last_policy = pol
        mode = pol.mode
        if mode == "off":
            self.last = None
            return buf
        if carried is not None:
            verdict, out = carried, buf
        else:
            verdict, out = judge(buf, self.keys, self.profile, now_ns + self.utc_offset_ns)
        self.last = verdict
        status = verdict.status
        if status == "verified":
            pol.verified += 1
            if carried is None:
                pol.signed = buf
                self._remember(pol, buf, verdict)
            if pol.key_id != verdict.key_id:  # the first verified frame, or a new key id
                self._verified_anew(pol, verdict, now_ns)
            return out
        if status == "unsigned" and mode == "optional":
            pol.counts["unsigned_accepted"] += 1
            return buf
        self._refuse(pol, verdict, now_ns)
        return None

    def _verified_anew(self, pol: Policy, verdict: Verdict, now_ns: int) -> None:
        """A verified frame under a key id the policy does not hold (the first frame, a
        rollover, the first after a refusal event): noted, and journaled through the
        subscription's auth machine. Both paths of `check` call it, only on that change."""
        pol.key_id = verdict.key_id
        self._feed(pol, "verified", now_ns, (verdict.key_id, verdict.algorithm))

    def _refuse(self, pol: Policy, verdict: Verdict, now_ns: int) -> None:
        """Count a refusal under its reason; a security event at most once an interval."""
        reason = verdict.reason
        if reason is None:  # unsigned where the policy requires a signature
            reason = "unsigned"
            verdict = _REFUSED[reason]
        self.last = verdict
        pol.counts[reason] += 1
        pol.pending += 1
        if pol.last_event is None or now_ns - pol.last_event >= EVENT_EVERY_NS:
            self._feed(pol, "refused", now_ns, (reason, pol.pending, verdict.key_id))
            pol.pending = 0
            pol.last_event = now_ns
            pol.key_id = None  # the next verified frame is journaled again

    def _remember(self, pol: Policy, buf: bytes, verdict: Verdict) -> None:
        """Remember a verified frame's header, extension layout and key, so the next
        frames behind the same header skip the parse (`check`); a GMAC frame's IV, new in
        every frame, is cut out of the remembered extension."""
        keys = self.keys
        key = keys.keys.get(verdict.key_id) if keys is not None and verdict.key_id else None
        if keys is None or key is None:
            return
        off = 16 if buf[12] == 0x81 and buf[13] == 0 else 12
        r1 = buf[off + 6] << 8 | buf[off + 7]
        r2 = buf[off + 8] << 8 | buf[off + 9]
        apdu_end = off + 2 + (buf[off + 4] << 8 | buf[off + 5])
        ext_len = self.profile.length(r1, r2, buf[off : off + 6])
        ext_end = apdu_end + ext_len
        av_end = ext_end - 2 - key.key.algorithm.mac_len
        gk = stream_key(buf)
        if gk is None:
            return
        head_end = buf.index(gk, off + 10) + len(gk)
        iv_at: int | None = 0
        if key.key.algorithm.gmac:
            iv_at = _iv_offset(buf, av_end, key.key_id)
        if iv_at is None:
            return
        c1, c2 = self.profile.clear(r1, r2)
        head = buf[: off + 6] + c1.to_bytes(2, "big") + c2.to_bytes(2, "big")
        if len(self.fast) >= MAX_KNOWN:
            self.fast.clear()
        self.fast[buf[:head_end]] = (
            pol,
            off,
            head_end,
            apdu_end,
            # through the mAC's tag and length octets (GMAC: up to the IV's content)
            buf[apdu_end : iv_at or av_end + 2],
            av_end,
            ext_end,
            key.key,
            verdict,
            Verdict("refused", "bad_mac", key.key_id, key.algorithm),
            key.not_before_ns - keys.grace_ns,
            key.not_after_ns + keys.grace_ns,
            head + buf[off + 10 : head_end],
            iv_at,
            buf[iv_at + IV_LEN : av_end + 2] if iv_at else b"",
        )

    def _feed(self, pol: Policy, event: str, now_ns: int, payload: Any) -> None:
        if pol.machine is None:
            pol.machine = self.table.new(f"auth:{pol.stream}", stream=pol.stream)
            self.scheduler.start(pol.machine, now_ns)
        self.scheduler.feed(pol.machine.id, event, now_ns, payload)

    def counters(self) -> dict[str, Any]:
        """Per subscription: policy, verified and refused counts per reason, state."""
        out: dict[str, Any] = {}
        for pol in (*self.by_key.values(), self.default):
            if pol.mode == "off" and not pol.counts and not pol.verified:
                continue
            m = pol.machine
            out[pol.stream] = {
                "policy": pol.mode,
                "state": m.state if m is not None else "unverified",
                "key_id": m.ctx["key_id"] if m is not None else None,
                "counts": dict(sorted((pol.counts + Counter({"verified": pol.verified})).items())),
            }
        return out

    def refused(self, stream_label: str) -> dict[str, int]:
        """The refusal counts of one subscription, for its LGOS view."""
        for pol in self.by_key.values():
            if pol.stream == stream_label:
                return {
                    f"auth_{k}": n
                    for k, n in pol.counts.items()
                    if k not in ("verified", "unsigned_accepted")
                }
        return {}


def _iv_offset(buf: bytes, av_end: int, key_id: int) -> int | None:
    """Where a verified GMAC frame's IV content starts: its AuthenticationValue ends
    `83 0c IV 84 L KeyID` (the strict parse's order, KeyID minimally encoded), so the IV
    sits before the KeyID TLV; None if the octets are not that (then nothing is
    remembered and every frame takes the strict parse)."""
    kid = len(encode_signed(key_id))
    iv_at = av_end - kid - 2 - IV_LEN
    if buf[iv_at - 2 : iv_at] != b"\x83\x0c" or buf[av_end - kid - 2] != 0x84:
        return None
    return iv_at


# -- the auth table's actions ------------------------------------------------------------------


@REGISTRY.action
def note_key(ctx: dict[str, Any], ev: Any) -> dict[str, Any]:
    key_id, algorithm = ev.payload
    return {"key_id": key_id, "algorithm": algorithm}


@REGISTRY.action
def note_refusal(ctx: dict[str, Any], ev: Any) -> dict[str, Any]:
    reason, count, _ = ev.payload
    return {"reason": reason, "refused": count}


@REGISTRY.action
def security_event(ctx: dict[str, Any], ev: Any) -> SecurityEvent:
    reason, count, key_id = ev.payload
    return SecurityEvent(ctx["stream"], reason, count, key_id)


# -- signing ---------------------------------------------------------------------------------


class Signer:
    """Signs every frame of one publication, retransmissions included.

    The key is the one in force at the frame's time among the configured key and its chain
    (the newest whose not_before has come and whose not_after has not passed), so the
    publisher switches key ids at the next key's not_before. A GMAC IV is `iv_prefix` (six
    octets the shell draws at random when the process starts) and a six-octet counter, so
    an IV never repeats under one key, across restarts too (a per-process prefix).
    """

    __slots__ = ("counter", "iv_prefix", "key_id", "keys", "profile", "signed", "unsigned")

    def __init__(
        self,
        keys: KeyFile | None,
        key_id: int,
        profile: HeaderProfile,
        iv_prefix: bytes = bytes(6),
    ) -> None:
        self.keys = keys
        self.key_id = key_id
        self.profile = profile
        self.iv_prefix = iv_prefix
        self.counter = 0
        self.signed = 0
        #: frames not sent because no key of the publication was in force
        self.unsigned = 0

    def key(self, utc_ns: int) -> Key | None:
        """The key a frame at `utc_ns` is signed with, None when none is in force."""
        if self.keys is None:
            return None
        best = None
        for k in self.keys.successors(self.key_id):
            if k.not_before_ns <= utc_ns <= k.not_after_ns:
                best = k
        return best

    def sign(self, frame: bytes, utc_ns: int) -> bytes | None:
        key = self.key(utc_ns)
        if key is None or key.key.algorithm.encrypts:  # a GCM key signs no Layer-2 frame
            self.unsigned += 1
            return None
        iv = None
        if key.key.algorithm.gmac:
            iv = self.iv_prefix + self.counter.to_bytes(6, "big")
            self.counter += 1
        nxt = [
            k.not_before_ns
            for k in self.keys.successors(self.key_id)  # type: ignore[union-attr]
            if k.not_before_ns > key.not_before_ns
        ]
        to_next = (min(nxt) - utc_ns) // 1_000_000_000 if nxt else -1
        self.signed += 1
        return sign(
            frame,
            key.key,
            self.profile,
            iv=iv,
            time_of_current_key=max(0, key.not_before_ns // 1_000_000_000),
            time_to_next_key=max(-(1 << 31), min(to_next, (1 << 31) - 1)),
        )
