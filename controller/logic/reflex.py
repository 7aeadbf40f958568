"""The trip reflex: the engine's decision on the next trip frame, compiled ahead of it.

A trip frame costs the engine a parse, a judge, seven machine steps and two encodings
before the TRIP bytes exist. Almost all of that is known before the frame arrives: while a
protection stream sits valid at "no trip" and the breaker is closed, the only frame that
trips is the stream's last frame with stNum + 1, sqNum 0 and the trip member TRUE, and what
the engine emits for it (the TRIP command's framed bytes with the link's next sequence
number, the trip-acknowledged frame) depends on nothing the frame can still vary but its
TAL, its `t` and the time it comes.

So `arm` asks the engine's own functions and tables what they would do with that
candidate frame, without doing it: the input's read and edge (`Rule.read`,
`Inputs.edge_events`), the bay table's step on the trip event, the link's tables on the
device command (its command machine frames it with the link's next sequence number, the
link's own `build`), the publisher's table and template on each published topic. Each
machine is asked through `preview`: a twin sharing its table and context dispatches the
event and is dropped, the machine untouched. No rule is restated here and nothing of the
controller is copied (a copy and a whole run of the engine made each arming long enough
to delay the trip it was for, `docs/reflex.md`). An arming holds

- the octets the frame must carry, as three segments (everything up to the TAL TLV, from
  it to the `t` content, from `t` to the end), per TAL width that fits the bound the
  receive rules put on TAL;
- what the engine read to decide (a fingerprint: every machine's state and context but
  the counters a retransmission moves), so any other change disarms it;
- what the engine emits for it: the device bytes and the frames, with where their `t`
  (the bay's UTC at the input) sits, filled in for the time the frame really comes.

`Arming.match` is the frame-path check: a dict lookup by length, three slice compares, a
few integer compares, the fingerprint compare. It refuses (and the engine's path runs
alone, as without a reflex) whenever a timer is due, the `t` is older than the stream's
last, or the TAL is outside its bound: what it accepts is a subset of what the engine
trips on, which `tests/logic/test_reflex.py` checks by running both on random states and
frames. `Arming.match_trailed` is the same check on a frame with a PRP trailer, before
the LRE: the trailer's four octets for this port and length, then `match`'s, then the
LRE's read-only verdict that it is a first copy (`docs/reflex.md`, "With native PRP").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from goosectl.controller.engine.effects import Raise, StartTimer
from goosectl.controller.engine.machine import EngineError, Machine, Step
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.effects import Transmit as GooseTransmit
from goosectl.controller.goose.fastpath import spans
from goosectl.controller.link.effects import Outcome, Signal, Submit
from goosectl.controller.link.effects import Transmit as LinkTransmit
from goosectl.controller.logic.effects import DeviceCommand, PublishTopic
from goosectl.controller.logic.mapping import publication_values
from goosectl.controller.logic.mode_actions import TEST_STATES, WITHHOLDING
from goosectl.protocols.goose import GooseError, decode_frame, utc_octets
from goosectl.protocols.goose.security import MacKey
from goosectl.protocols.goose.security import parse as parse_extension
from goosectl.protocols.prp import LAN_IDS, RCT_LEN, SUFFIX, lsdu_size, tagged
from goosectl.protocols.prp.rct import MIN_UNTAGGED

if TYPE_CHECKING:
    from goosectl.controller.config.keys import KeyFile
    from goosectl.controller.engine.timers import TimerHeap
    from goosectl.controller.goose.auth import AuthGate, Policy
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.logic.mapping import Rule

#: the bay event a trip input raises: the inputs that feed it are the ones armed
TRIP_EVENT = "protection_trip"
#: context fields a retransmission (or a publisher's own repeat) moves without changing
#: what the next new state does; `match` checks the ones that matter (`t_ns`) itself
VOLATILE = {
    "goose-stream": frozenset({"sq", "rx_ns", "tal_ns", "t_ns", "data_ns"}),
    "goose-side": frozenset({"sq", "rx_ns", "tal_ns"}),
    "goose-publisher": frozenset({"sq", "k"}),
}
#: tags of the goosePdu fields the candidate changes or reads
GOCB, TAL, T, ST, SQ, ALL_DATA = 0x80, 0x81, 0x84, 0x85, 0x86, 0xAB
#: the UTC shift between the two previews of `arm` that find where the bay's UTC sits in
#: what it emits (a shift that moves every octet of `t` but the seconds' top one)
PROBE_NS = 1_234_567_891


# -- BER, only as far as the candidate needs ---------------------------------------------


def _tlvs(buf: bytes, pos: int, end: int) -> list[tuple[int, int, int, int]] | None:
    """(tag, start, content start, stop) of each TLV in buf[pos:end]; None if odd."""
    out = []
    while pos < end:
        tag = buf[pos]
        n = buf[pos + 1]
        c = pos + 2
        if n & 0x80:
            k = n & 0x7F
            if not 0 < k <= 2:
                return None
            n = int.from_bytes(buf[c : c + k])
            c += k
        if c + n > end:
            return None
        out.append((tag, pos, c, c + n))
        pos = c + n
    return out


def _length(n: int, like: int) -> bytes:
    """A BER length of `n` in the form the sender used (`like` length octets), if it fits."""
    if like == 1:
        if n >= 0x80:
            raise ValueError("grew out of the short form")
        return bytes((n,))
    k = like - 1
    if n >= 1 << (8 * k):
        raise ValueError("grew out of its long form")
    return bytes((0x80 | k,)) + n.to_bytes(k)


def _unsigned(v: int) -> bytes:
    """Minimal BER INTEGER content of an unsigned value (a zero octet before a top bit)."""
    return v.to_bytes(v.bit_length() // 8 + 1)


@dataclass(frozen=True)
class Candidate:
    """The next trip frame of a stream, spliced from its last frame's own octets."""

    buf: bytes
    #: offsets in `buf`: the TAL TLV, the `t` content
    tal_at: int
    t_at: int


def candidate(last: bytes, st_num: int, index: int, tal: int | None = None) -> Candidate | None:
    """`last` with stNum `st_num`, sqNum 0 and allData member `index` (a BOOLEAN) TRUE,
    every other octet as the publisher sent it (TAL `tal` if given, in its minimal form);
    None if the frame is not one this splice understands (then nothing is armed)."""
    off = 16 if last[12:14] == b"\x81\x00" else 12
    p = off + 10  # past the EtherType, APPID, length, reserved
    if last[p] != 0x61:
        return None
    outer = _tlvs(last, p, len(last))
    if outer is None or len(outer) != 1:
        return None
    _, _, c0, stop = outer[0]
    fields = _tlvs(last, c0, stop)
    if fields is None:
        return None
    parts: list[bytes] = []
    for tag, start, c, end in fields:
        if tag == ST:
            parts.append(bytes((ST,)) + _length(len(_unsigned(st_num)), c - start - 1))
            parts.append(_unsigned(st_num))
        elif tag == SQ:
            if c - start != 2:
                return None
            parts.append(bytes((SQ, 1, 0)))
        elif tag == TAL and tal is not None:
            content = _unsigned(tal)
            parts.append(bytes((TAL, len(content))) + content)
        elif tag == ALL_DATA:
            items = _tlvs(last, c, end)
            if items is None or index >= len(items):
                return None
            it, _, ic, ie = items[index]
            if it != 0x83 or ie - ic != 1:
                return None
            data = last[c:ic] + b"\x01" + last[ie:end]
            parts.append(bytes((ALL_DATA,)) + _length(len(data), c - start - 1) + data)
        else:
            parts.append(last[start:end])
    try:
        pdu_content = b"".join(parts)
        pdu = b"\x61" + _length(len(pdu_content), c0 - p - 1) + pdu_content
    except ValueError:
        return None
    head = last[: off + 4] + (8 + len(pdu)).to_bytes(2) + last[off + 6 : off + 10]
    buf = head + pdu
    cuts = spans(buf)
    if cuts is None:
        return None
    return Candidate(buf, cuts[0] - 2, cuts[2])


# -- the engine's steps, previewed -------------------------------------------------------


def preview(m: Machine, event: str, now_ns: int, payload: Any = None) -> tuple[Step, Machine]:
    """What `m`'s own table does with `event` now, without doing it: the step (its effects
    in order) and a twin holding the state and context it would end in. A step replaces a
    context, never changes it in place (`controller/engine/context.py`), so the twin shares
    the machine's context and table and leaves the machine exactly as it was."""
    twin = object.__new__(Machine)
    for name in Machine.__slots__:
        if hasattr(m, name):
            setattr(twin, name, getattr(m, name))
    twin.ignored = Counter()  # the one thing a dispatch changes in place
    return twin.dispatch(event, now_ns, payload), twin


@dataclass(frozen=True)
class Emitted:
    """What the engine writes at its `urgent` moments for the trip frame, in order."""

    device: bytes
    frames: tuple[SendFrame, ...]


def _of(step: Step, kinds: tuple[type, ...]) -> list[Any]:
    return [e for e in step.effects if isinstance(e, kinds)]


def device_bytes(bay: BayController, command: DeviceCommand, now_ns: int) -> bytes | None:
    """The bytes the link writes at once for `command` (`LinkCore.send_command`): its link
    machine passes it on to the command machine, which frames it with the next sequence
    number (the link's own `build`) and transmits it now; None if the link would hold it,
    refuse it or queue it behind a command on the wire (nothing to write early)."""
    link = bay.link
    if link._out:
        return None
    machines = link.bus.machines
    sub = Submit(command.command, ())
    step, _ = preview(machines["link"], "user_command", now_ns, (sub, link.next_seq))
    passed = _of(step, (Submit, Signal, Outcome, LinkTransmit))
    if passed != [sub]:
        return None
    step, _ = preview(machines["commands"], "submit", now_ns, sub)
    sent = _of(step, (LinkTransmit, Signal, Outcome, Submit))
    if len(sent) != 1 or type(sent[0]) is not LinkTransmit:
        return None
    return bytes(sent[0].frame)


def topic_frames(
    bay: BayController, topic: str, state: Machine, now_ns: int, utc_ns: int
) -> list[SendFrame] | None:
    """The frames `PublishTopic(topic)` sends, the bay in `state` (`_handle`): each of the
    topic's publications' values (`publication_values`), its publisher's new state (its
    own table) and its bytes (its own template); None if one would be held back by the
    rate limit, muted or signed (a signature is made at send time)."""
    hub = bay.hub
    test = bay.mode.state in TEST_STATES
    out = []
    for pub in bay.pubs_by_topic.get(topic, ()):
        values = publication_values(pub, state.state, state.ctx, utc_ns, test)
        p = hub.by_gocb.get(pub.gocb_ref)
        if p is None or hub.signers.get(p.id) is not None:
            return None
        step, _ = preview(hub.scheduler.machines[p.id], "publish", now_ns, (tuple(values), utc_ns))
        txs = _of(step, (GooseTransmit,))
        if len(txs) != 1:
            return None
        out.append(p.frame(txs[0]))
    return out


def trip_outputs(
    bay: BayController, rule: Rule, values: tuple, now_ns: int, utc_ns: int
) -> Emitted | None:
    """The engine's decision on a frame carrying `values` for `rule`'s stream, compiled
    from its own functions and tables: the input's read (`Rule.read`) and edge
    (`Inputs.edge_events`), the bay table's step on the trip event, then each effect of
    that step as `BayController._handle` takes it: the device command's bytes
    (`device_bytes`) and the published topics' frames (`topic_frames`), in the step's
    order. None unless the step writes exactly one device command and sends a frame."""
    m = bay.input_machines[rule.name]
    valid, value = rule.read(values, bay.mode.state in TEST_STATES)
    if not valid or m.state != "valid":
        return None
    events = bay.inputs.edge_events(rule, m.ctx["value"], value)
    if len(events) != 1 or events[0][0] != TRIP_EVENT:
        return None
    try:
        step, after = preview(bay.bay, TRIP_EVENT, now_ns, events[0][1])
    except EngineError:
        return None
    device = b""
    frames: list[SendFrame] = []
    for e in step.effects:
        t = type(e)
        if isinstance(e, DeviceCommand):
            if device or frames or bay.mode.state in WITHHOLDING:
                return None  # the TRIP first, alone, as the breaker waits for it
            got = device_bytes(bay, e, now_ns)
            if got is None:
                return None
            device = got
        elif isinstance(e, PublishTopic):
            sent = topic_frames(bay, e.topic, after, now_ns, utc_ns)
            if sent is None:
                return None
            frames += sent
        elif t is SendFrame or t is Raise:
            return None
    if not device or not frames:
        return None
    return Emitted(device, tuple(frames))


# -- the fingerprint ---------------------------------------------------------------------


def _machines(bay: BayController) -> list[Machine]:
    return [*bay.scheduler.machines.values(), *bay.link.bus.machines.values()]


def fingerprint_of(bay: BayController) -> tuple[Callable[[], bool], tuple]:
    """A check that nothing the engine's decision depends on has changed, and what it
    compares with: every machine (the same ones, their states, their contexts but the
    `VOLATILE` fields), the device bytes nobody has taken yet, the link's next sequence
    number. A context is replaced, never changed in place, by a step: the same context
    object is the same context, so the check compares fields only of a machine that
    stepped, and a context found equal is remembered as the one to compare by identity
    next time. The loop checks every round (`LiveReflex.rearm`), so when a trip frame
    comes the contexts replaced since arming have been compared already and the check on
    the frame's path compares identities only."""
    entries: list[list[Any]] = []  # [machine, state, context, its getter, its values]
    for m in _machines(bay):
        skip = VOLATILE.get(m.table.spec.name, frozenset())
        keys = tuple(k for k in m.ctx if k not in skip)
        get = itemgetter(*keys, *keys[:1]) if keys else _nothing
        entries.append([m, m.state, m._ctx, get, get(m._ctx)])
    scheduler, bus, link = bay.scheduler, bay.link.bus, bay.link
    sizes = (len(scheduler.machines), len(bus.machines))
    seq = link.next_seq

    def same() -> bool:
        if len(link._out) or link.next_seq != seq:
            return False
        if len(scheduler.machines) != sizes[0] or len(bus.machines) != sizes[1]:
            return False
        for entry in entries:
            m, state, ctx, get, value = entry
            if m.state != state:
                return False
            now = m._ctx
            if now is not ctx:
                if get(now) != value:
                    return False
                entry[2] = now
        return True

    return same, (sizes, seq)


def _nothing(_ctx: Any) -> tuple:
    return ()


# -- the arming ----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class SignedArm:
    """A signed stream's candidate (IEC 62351-6): the unsigned candidate's octets with the
    reserved fields its header profile writes, then the extension of the stream's last
    verified frame, and what the gate verifies it with (the key entry's prepared key, its
    window with the grace, the key file it came from)."""

    #: frame length -> (the signed frame's octets before the TAL TLV, TAL width, `t`'s offset)
    by_len: dict[int, tuple[bytes, int, int]]
    #: the extension's length, its octets up to TimeToNextKey's content and that content's
    #: width; after it, up to the IV's content (GMAC) or through the mAC's tag and length
    ext_len: int
    head: bytes
    ttnk: int
    rest: bytes
    #: GMAC: the IV's length (12) and the octets after it through the mAC's tag and length
    iv_len: int
    after_iv: bytes
    mac_len: int
    #: the EtherType's offset (where the MAC's domain starts)
    off: int
    key: MacKey
    key_id: int
    #: the key's window in UTC ns, the grace included (`in_force`)
    lo: int
    hi: int
    gate: AuthGate
    policy: Policy
    keys: KeyFile
    #: a signed candidate with its MAC zeroed, for `Arming.rehearse` (never verifies)
    example: bytes = b""


@dataclass(slots=True, eq=False)
class Arming:
    """One protection stream's next trip frame, and what the engine emits for it."""

    #: frame length -> (the octets before the TAL TLV, the TAL width, where `t` starts)
    by_len: dict[int, tuple[bytes, int, int]]
    #: from after the TAL TLV to the `t` content (datSet, goID, `t`'s tag and length)
    mid: bytes
    #: after `t`: stNum + 1, sqNum 0, simulation, confRev, ndsCom, entries, allData
    tail: bytes
    side: str
    vlan: Any
    tal_limit_ms: int
    #: the stream's machine (its `t` reference, read at the frame)
    stream: Machine
    #: the timer heaps whose due timers the engine would fire first
    timers: tuple[Any, ...]
    #: (machine, timer) pairs whose firing changes nothing the decision reads
    #: (`harmless_timers`): due, they do not refuse the frame
    harmless: frozenset[tuple[str, str]]
    #: True while nothing the arming read has changed (`fingerprint_of`)
    same: Callable[[], bool]
    #: the `t` reference it last compared with, and its octets (seconds, fraction)
    t_ref: list[Any]
    emitted: Emitted
    #: (frame, offset) of each place the bay's UTC sits in the emitted frames
    utc_at: tuple[tuple[int, int], ...]
    #: each emitted frame cut at those places (None: no UTC in it), joined by the UTC
    pieces: tuple[tuple[bytes, ...] | None, ...]

    #: the candidate as its publisher signs it (IEC 62351-6), None: unsigned only
    signed: SignedArm | None = None
    #: the unsigned candidate with a PRP trailer for `side`'s LAN: frame length -> the
    #: trailer's last four octets (LanId, LSDUsize, suffix) that length must carry
    trailed: dict[int, bytes] = field(default_factory=dict)
    #: candidates `rehearse` runs the path on: the unsigned one (if armed) and the signed
    #: one with its MAC zeroed (if signed)
    rehearsals: tuple[bytes, ...] = ()

    def match_trailed(
        self, buf: bytes, side: str, now_ns: int, vlan: Any, first_copy: Callable[..., bool]
    ) -> bool | None:
        """`match` for the candidate followed by a PRP Redundancy Control Trailer valid for
        this port (`protocols/prp`: LanId the port's LAN, LSDUsize the frame's, the suffix),
        judged before the LRE has seen the frame: the trailer's four octets compared (a
        wrong LanId, LSDUsize or suffix does not match), the APDU as `match` judges it
        (its EtherType GOOSE's: no supervision frame), and last the LRE's own verdict on
        such a frame without its bookkeeping (`first_copy(buf, now_ns)`: a copy it would
        drop, or its short way closed, does not match). What it accepts, the LRE hands up
        unchanged but for the trailer, and `match` accepts what it hands up: the engine
        trips on it (`tests/prp/test_reflex_first.py`).

        True: fire. False: the trailer is this port's at a candidate length but the
        candidate's octets or the fingerprint refuse the frame, and so does `match` on
        the frame the LRE hands up (the same compares on the same octets, nothing of the
        engine moved between): it need not be judged again. None: not judged here (no
        such trailer, or the LRE's verdict no): `match` after the LRE decides."""
        n = len(buf)
        want = self.trailed.get(n)
        if want is None or buf[n - 4 :] != want:
            return None
        a = n - RCT_LEN
        if not (self._pdu(buf, self.by_len[a], a, side, now_ns, vlan) and self.same()):
            return False
        return True if first_copy(buf, now_ns) else None

    def match(self, buf: bytes, side: str, now_ns: int, vlan: Any) -> bool:
        """True if the engine, given `buf` now, trips and emits `emitted` (see module)."""
        n = len(buf)
        e = self.by_len.get(n)
        if e is None:
            s = self.signed
            return s is not None and self._match_signed(s, buf, n, side, now_ns, vlan)
        return self._pdu(buf, e, n, side, now_ns, vlan) and self.same()

    def _pdu(
        self, buf: bytes, e: tuple[bytes, int, int], end: int, side: str, now_ns: int, vlan: Any
    ) -> bool:
        """The frame's octets up to `end` (the APDU's) are the candidate's but for TAL and
        `t`, those within their bounds, and no timer that matters is due."""
        if side != self.side or vlan != self.vlan:
            return False
        prefix, w, t_at = e
        g = len(prefix)
        if buf[:g] != prefix or buf[g + 1] != w or buf[g] != TAL or buf[g + 2] & 0x80:
            return False
        if buf[t_at + 8 : end] != self.tail or buf[g + 2 + w : t_at] != self.mid:
            return False
        tal = int.from_bytes(buf[g + 2 : g + 2 + w])
        if not 0 < tal <= self.tal_limit_ms:
            return False
        ref = self.stream._ctx["t_ns"]
        t_ref = self.t_ref
        if ref != t_ref[0]:
            # the least `t` octets whose time is not before the reference: a frame's `t`
            # at or after them is not stale, whatever the skew
            t_ref[:] = ref, utc_octets(ref) if ref else bytes(7)
        if buf[t_at : t_at + 7] < t_ref[1]:
            return False
        for timers in self.timers:
            if timers.any_due(now_ns) and not only_harmless_due(timers, now_ns, self.harmless):
                return False
        return True

    def _match_signed(
        self, s: SignedArm, buf: bytes, n: int, side: str, now_ns: int, vlan: Any
    ) -> bool:
        """`match` for a signed frame: the candidate's APDU, then the extension the gate
        would verify (`controller/goose/auth.py`): its octets the last verified frame's but
        for TimeToNextKey (its width, minimal as the strict parse wants it) and the IV, the
        key file the same, the key in its window, and the MAC last (constant time). The
        policy's key id is the armed one, or none since a refusal event: the gate then
        journals the frame as the first verified one again, a step of its auth machine
        that emits nothing, so the engine still writes what the reflex wrote."""
        e = s.by_len.get(n)
        if e is None:
            return False
        a = n - s.ext_len  # the APDU's end
        if not self._pdu(buf, e, a, side, now_ns, vlan):
            return False
        h = a + len(s.head)
        if buf[a:h] != s.head:
            return False
        if s.ttnk > 1:
            b0, b1 = buf[h], buf[h + 1] & 0x80
            if (b0 == 0 and not b1) or (b0 == 0xFF and b1):
                return False
        r = h + s.ttnk
        q = r + len(s.rest)
        if buf[r:q] != s.rest:
            return False
        iv = None
        if s.iv_len:
            iv = buf[q : q + s.iv_len]
            q += s.iv_len
            if buf[q : n - s.mac_len] != s.after_iv:
                return False
        gate, kid = s.gate, s.policy.key_id
        if gate.keys is not s.keys or gate.carried is not None:
            return False
        if kid is not None and kid != s.key_id:
            return False
        if not s.lo <= now_ns + gate.utc_offset_ns <= s.hi or not self.same():
            return False
        av_end = n - s.mac_len - 2
        domain = buf[s.off : av_end]  # a bytes slice: less work than a memoryview's
        if iv is None:
            return s.key.check_hmac(domain, buf[av_end + 2 :])
        return s.key.check_gmac(domain, iv, buf[av_end + 2 :])

    def rehearse(self, now_ns: int, utc_ns: int) -> None:
        """The frame path run on the candidate's own octets and the answer thrown away, so
        its code and data are back in the caches when a trip frame comes: a path left
        alone for milliseconds on a shared core is evicted and then runs several times
        slower (docs/reflex.md, Keep-warm). It writes nothing and sends nothing, and moves
        nothing of the engine: `match` only reads (its `t` cache and the fingerprint's
        remembered contexts aside, which hold the values they held)."""
        for buf in self.rehearsals:
            self.match(buf, self.side, now_ns, self.vlan)
        self.outputs(utc_ns)

    def outputs(self, utc_ns: int) -> Emitted:
        """The emitted device bytes and frames with the bay's UTC `utc_ns` filled in."""
        if not self.utc_at:
            return self.emitted
        raw = utc_octets(utc_ns)
        return Emitted(
            self.emitted.device,
            tuple(
                f if pieces is None else SendFrame(f.gocb_ref, f.sides, raw.join(pieces))
                for f, pieces in zip(self.emitted.frames, self.pieces, strict=True)
            ),
        )


def arm(bay: BayController, rule: Rule) -> Arming | None:
    """The arming of `rule`'s stream now, or None unless every condition holds: the rule
    raises a trip from a top-level BOOLEAN, it reads valid FALSE, its stream is valid, on
    its real stream, not in conflict, with a last frame; no timer is due; and the engine's
    decision on the candidate (`trip_outputs`) writes one device command and sends frames
    that differ between two UTCs only where the bay's UTC sits in them."""
    stream = _armable_stream(bay, rule)
    if stream is None:
        return None
    sm, mem = stream.machine, stream.memory
    side = _last_side(bay, stream)
    if side is None:
        return None
    st = (sm.ctx["st"] + 1) & 0xFFFFFFFF or 1
    cand = candidate(mem.buf, st, rule.index)
    if cand is None:
        return None
    now = bay._now
    if bay.scheduler.timers.any_due(now) or bay.link.bus.timers.any_due(now):
        return None
    try:
        values = decode_frame(cand.buf, vlan=mem.tag).all_data
    except GooseError:
        return None
    same, _ = fingerprint_of(bay)
    utc0 = now + bay.utc_offset_ns
    first = trip_outputs(bay, rule, values, now, utc0)
    if first is None:
        return None
    shifted = trip_outputs(bay, rule, values, now, utc0 + PROBE_NS)
    if shifted is None:
        return None
    utc_at = _utc_places(first, shifted, utc0)
    if utc_at is None:
        return None
    limit_ms = (stream.tal_limit_ns // 1_000_000) if stream.tal_limit_ns else (1 << 31) - 1
    by_len, mid, tail, bufs = _tal_widths(mem.buf, st, rule.index, cand.tal_at, limit_ms)
    gate = bay.hub.bank.auth
    pol = gate.policy(cand.buf) if gate is not None else None
    signed = None
    if gate is not None and pol is not None and pol.mode != "off":
        signed = signed_arm(gate, pol, bufs)
        if pol.mode == "required":
            by_len = {}  # an unsigned frame never reaches the logic
    if not by_len and signed is None:
        return None
    rehearsals = (bufs[0][0],) if by_len else ()  # by_len's entries come from bufs
    arming = Arming(by_len=by_len, emitted=first, mid=mid, same=same, t_ref=[None, b""],
                    signed=signed, pieces=_pieces(first, utc_at), side=side, stream=sm, tail=tail,
                    tal_limit_ms=limit_ms, timers=(bay.scheduler.timers, bay.link.bus.timers),
                    harmless=harmless_timers(bay, now), utc_at=utc_at,
                    vlan=mem.tag, trailed=trailer_tails(by_len, side),
                    rehearsals=rehearsals + ((signed.example,) if signed else ()))  # fmt: skip
    # the previews moved nothing of the engine
    return arming if same() else None


def trailer_tails(by_len: dict[int, tuple[bytes, int, int]], side: str) -> dict[int, bytes]:
    """For each candidate length, the length of the candidate with a PRP trailer for
    `side`'s LAN and the trailer's last four octets (LanId, LSDUsize, suffix), as
    `protocols.prp.add_rct` writes them, for the bytes the live loop gets (the kernel took
    the VLAN tag). Left out, and so judged after the LRE as without PRP: a candidate with
    an inline tag, and one short enough to be padded before its trailer (its padded form is
    not the candidate's octets; its plain form, padded on the wire, is not either)."""
    lan = LAN_IDS.get(side)
    out: dict[int, bytes] = {}
    if lan is None:
        return out
    for n, (prefix, _, _) in by_len.items():
        if tagged(prefix) or n < MIN_UNTAGGED:
            continue
        size = lsdu_size(n + RCT_LEN, False)
        if size <= 0x0FFF:
            out[n + RCT_LEN] = ((((lan << 12) | size) << 16) | SUFFIX).to_bytes(4)
    return out


def _armable_stream(bay: BayController, rule: Rule) -> Any:
    """The subscriber stream `rule` reads, if the rule and its state allow arming: a trip
    from a top-level BOOLEAN reading valid FALSE, the bay on and not simulating, the
    stream valid on its real stream, not in conflict, with a last frame; else None."""
    if rule.event != TRIP_EVENT or rule.path:
        return None
    if bay.mode.state != "on" or bay.simulation:
        return None
    m = bay.input_machines[rule.name]
    if m.state != "valid" or m.ctx["value"] is not False:
        return None
    bank = bay.hub.bank
    stream = next((s for s in bank.streams.values() if rule.stream in (s.label, s.gocb_ref)), None)
    if stream is None or stream.memory is None or stream.lgos.ctx["sim"]:
        return None
    sm = stream.machine
    c = sm.ctx
    if sm.state != "valid" or c["conflict"] or stream.lgos.state != "valid" or c["st"] is None:
        return None
    return stream


def _tal_widths(
    buf: bytes, st: int, index: int, tal_at: int, limit_ms: int
) -> tuple[dict[int, tuple[bytes, int, int]], bytes, bytes, list[tuple[bytes, int, int, int]]]:
    """The candidate built with a TAL of each width (1-4 octets) the stream's TAL limit
    allows, keyed by frame length: (head up to TAL, width, offset of t); the bytes
    between TAL and t, and after t (the same for every width); and each candidate whole
    (its octets, TAL offset, TAL width, offset of t), for its signed form (`signed_arm`)."""
    by_len: dict[int, tuple[bytes, int, int]] = {}
    bufs: list[tuple[bytes, int, int, int]] = []
    mid = tail = b""
    for w in (1, 2, 3, 4):
        tal = 1 << (8 * (w - 1)) if w > 1 else 1
        if tal > limit_ms:
            break
        alt = candidate(buf, st, index, tal)
        if alt is None or alt.tal_at != tal_at:
            continue
        by_len[len(alt.buf)] = (alt.buf[:tal_at], w, alt.t_at)
        bufs.append((alt.buf, tal_at, w, alt.t_at))
        mid = alt.buf[tal_at + 2 + w : alt.t_at]
        tail = alt.buf[alt.t_at + 8 :]
    return by_len, mid, tail, bufs


def signed_arm(
    gate: AuthGate, pol: Policy, bufs: list[tuple[bytes, int, int, int]]
) -> SignedArm | None:
    """The signed form of the candidates `bufs`, for the extension of the subscription's
    last verified frame (`Policy.signed`) and the key it names; None when there is none,
    its key is not in the key file or encrypts, the last frame's MAC does not verify with
    it (the key file changed since), or a signed candidate would not parse back
    (the gate's strict parse, `protocols/goose/security.py`) to the unsigned candidate
    with that key id. Only that key is armed: after a rollover the publisher's new key id
    takes the engine's path until a frame verified with it is the last one."""
    last, keys = pol.signed, gate.keys
    if last is None or keys is None:
        return None
    try:
        ext = parse_extension(last, gate.profile)
    except GooseError:
        return None
    key = keys.keys.get(ext.key_id) if ext is not None else None
    if ext is None or key is None or key.key.algorithm.encrypts:
        return None
    off = 16 if last[12:14] == b"\x81\x00" else 12
    apdu_end = off + 2 + int.from_bytes(last[off + 4 : off + 6])
    ext_len = len(last) - len(ext.unsigned)
    raw = last[apdu_end : apdu_end + ext_len]
    cut = _extension_cuts(raw, key.key.algorithm.mac_len, key.key.algorithm.gmac)
    if cut is None or not key.key.check(ext.domain, ext.iv, ext.mac):
        return None  # (the last frame verifies with the armed key: it is the gate's)
    by_len: dict[int, tuple[bytes, int, int]] = {}
    mac_len = key.key.algorithm.mac_len
    example = b""
    for buf, tal_at, w, t_at in bufs:
        signed = _signed_candidate(buf, raw, gate, ext.key_id)
        if signed is not None:
            by_len[len(signed)] = (signed[:tal_at], w, t_at)
            example = example or signed[:-mac_len] + bytes(mac_len)
    if not by_len:
        return None
    head, ttnk, rest, iv_len, after_iv = cut
    return SignedArm(
        by_len=by_len, ext_len=ext_len, head=head, ttnk=ttnk, rest=rest, iv_len=iv_len,
        after_iv=after_iv, mac_len=mac_len, off=off, key=key.key,
        key_id=ext.key_id, lo=key.not_before_ns - keys.grace_ns,
        hi=key.not_after_ns + keys.grace_ns, gate=gate, policy=pol, keys=keys, example=example,
    )  # fmt: skip


def _extension_cuts(
    raw: bytes, mac_len: int, gmac: bool
) -> tuple[bytes, int, bytes, int, bytes] | None:
    """A verified extension (`A0 { A4 { 80 81 82 [83] 84 } 85 }`) cut where the next
    frame's may differ: (the octets before TimeToNextKey's content, its width, the octets
    after it up to the IV's content or through the mAC's tag and length, the IV's length,
    the octets after the IV through the mAC's tag and length); None if it is not that."""
    outer = _tlvs(raw, 0, len(raw))
    if outer is None or len(outer) != 1 or outer[0][0] != 0xA0:
        return None
    inner = _tlvs(raw, outer[0][2], len(raw))
    if inner is None or [t for t, *_ in inner] != [0xA4, 0x85]:
        return None
    (_, _, c4, e4), (_, _, c5, e5) = inner
    if e5 - c5 != mac_len:
        return None
    fields = {t: (c, e) for t, _, c, e in _tlvs(raw, c4, e4) or ()}
    if 0x82 not in fields or (0x83 in fields) != gmac:
        return None
    c82, e82 = fields[0x82]
    if not gmac:
        return raw[:c82], e82 - c82, raw[e82:c5], 0, b""
    c83, e83 = fields[0x83]
    return raw[:c82], e82 - c82, raw[e82:c83], e83 - c83, raw[e83:c5]


def _signed_candidate(buf: bytes, raw: bytes, gate: AuthGate, key_id: int) -> bytes | None:
    """The unsigned candidate `buf` as its publisher signs it: the reserved fields its
    header profile writes for an extension of `raw`'s length, then `raw` (its MAC zeroed:
    only the layout is checked here); None unless the gate's strict parse reads it back as
    `buf` signed with `key_id`."""
    off = 16 if buf[12:14] == b"\x81\x00" else 12
    r1 = int.from_bytes(buf[off + 6 : off + 8])
    r2 = int.from_bytes(buf[off + 8 : off + 10])
    try:
        r1, r2 = gate.profile.write(r1, r2, len(raw), buf[off : off + 6])
        signed = buf[: off + 6] + r1.to_bytes(2) + r2.to_bytes(2) + buf[off + 10 :] + raw
        ext = parse_extension(signed, gate.profile)
    except GooseError:
        return None
    if ext is None or ext.key_id != key_id or ext.unsigned != buf:
        return None
    return signed


def harmless_timers(bay: BayController, now_ns: int) -> frozenset[tuple[str, str]]:
    """The timers that may be due when the trip frame comes without changing what the
    engine does with it: a publisher's repeat, when its own table, previewed, moves only
    the fields a repeat moves (`VOLATILE`) and only sends its last state again. The engine
    fires them before the frame and sends their repeats before the TRIP; the reflex sends
    the TRIP and the ack first, the repeats follow from the engine."""
    out = set()
    volatile = VOLATILE["goose-publisher"]
    for pid in bay.hub.publishers:
        m = bay.scheduler.machines.get(pid)
        if m is None:
            continue
        try:
            step, twin = preview(m, "retransmit", now_ns)
        except EngineError:
            continue
        if not step.transitions or any(
            type(e) is not GooseTransmit and type(e) is not StartTimer for e in step.effects
        ):
            continue
        ctx, new = m._ctx, twin._ctx
        if all(new[k] == ctx[k] for k in ctx if k not in volatile):
            out.add((pid, "retransmit"))
    return frozenset(out)


def only_harmless_due(timers: TimerHeap, now_ns: int, harmless: frozenset) -> bool:
    """True if every timer due by `now_ns` is in `harmless` (cancelled and moved-later
    entries of the lazy heap are not due): a walk of the heap's due top only."""
    heap, live = timers._heap, timers._live
    n = len(heap)
    todo = [0]
    while todo:
        i = todo.pop()
        if i >= n:
            continue
        deadline, seq, machine, name = heap[i]
        if deadline > now_ns:
            continue  # nor anything below it
        rec = live.get(machine, {}).get(name)
        due = rec is not None and rec[1] == seq and rec[0] <= now_ns
        if due and (machine, name) not in harmless:
            return False
        todo += (2 * i + 1, 2 * i + 2)
    return True


def _last_side(bay: BayController, stream: Any) -> str | None:
    """The side the stream's frames come on: its only side, or the A/B selector's active
    one; None for an A/B stream without a selector (either side could be first)."""
    if not stream.side_ids:
        return "A"
    sel = stream.side_ids.get("selector")
    if sel is not None:
        return {"a_active": "A", "b_active": "B"}.get(bay.scheduler.machines[sel].state)
    for side in ("A", "B"):
        if bay.scheduler.machines[stream.side_ids[side]].state == "valid":
            return side
    return None


def _utc_places(a: Emitted, b: Emitted, utc0: int) -> tuple[tuple[int, int], ...] | None:
    """Where the bay's UTC sits in the emitted frames (frame, offset), as `t` or as a
    timestamp member: every place the first run's UTC octets appear, proven by filling the
    second run's UTC into them and getting the second run's frames; None if anything else
    differs (then the outputs depend on time in a way this arming does not model)."""
    if a.device != b.device or len(a.frames) != len(b.frames):
        return None
    old = utc_octets(utc0)
    places = []
    for i, (fa, fb) in enumerate(zip(a.frames, b.frames, strict=True)):
        if (fa.gocb_ref, fa.sides) != (fb.gocb_ref, fb.sides) or len(fa.data) != len(fb.data):
            return None
        at = fa.data.find(old)
        found = []
        while at >= 0:
            found.append(at)
            at = fa.data.find(old, at + 7)
        if _patched(fa.data, found, utc0 + PROBE_NS) != fb.data:
            return None
        places += [(i, at) for at in found]
    return tuple(places)


def _pieces(
    emitted: Emitted, places: tuple[tuple[int, int], ...]
) -> tuple[tuple[bytes, ...] | None, ...]:
    out: list[tuple[bytes, ...] | None] = []
    for i, f in enumerate(emitted.frames):
        ats = sorted(at for j, at in places if j == i)
        if not ats:
            out.append(None)
            continue
        cuts, p = [], 0
        for at in ats:
            cuts.append(f.data[p:at])
            p = at + 7
        cuts.append(f.data[p:])
        out.append(tuple(cuts))
    return tuple(out)


def _patched(data: bytes, places: list[int], utc_ns: int) -> bytes:
    raw = utc_octets(utc_ns)
    out = bytearray(data)
    for at in places:
        out[at : at + 7] = raw
    return bytes(out)


def trip_rules(bay: BayController) -> list[Rule]:
    """The inputs that raise the bay's trip."""
    return [r for r in bay.inputs.all if r.event == TRIP_EVENT]
