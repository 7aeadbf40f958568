"""The demo's scenario, made with goosectl's own publishers on the virtual clock.

The protection IED publishes its trip on two networks (VLAN 10 = A, VLAN 11 = B), bay 2
publishes its close-enable (CILO), SCADA publishes close requests; all with heartbeats and
bursts exactly as the publisher machine produces them. A test set publishes a simulated
copy of the protection stream for a moment. The script:

  0.5 s   SCADA close request                  -> close, spring discharged for 5 s
  2.0 s   a test set's simulated trip          -> refused: controller not in simulation
  3.0 s   protection trip, Tr.q invalid        -> refused by the input: no trip
  3.9 s   bay 2 falls silent (its TAL expires at about 5 s: interlock invalid, lost)
  4.5 s   protection trip, Tr.q test bit       -> refused: controller not in test mode
  6.0 s   protection trip                      -> TRIP, open, trip acknowledged
  6.5 s   SCADA close request                  -> refused: interlock bay2 invalid (lost)
  6.8 s   bay 2 is back; 7.0 s SCADA close     -> close
  8-11 s  network A is silent                  -> side A lost, then recovered
  9.0 s   protection trip (only on B)          -> TRIP, open: no trip lost
  10.0 s  bay 2 withdraws its close enable
  10.5 s  operator: mode test                  -> position republished with q.test
  10.8 s  protection test trip (Tr.q test)     -> acted on in test mode (breaker already
                                                  open: trip acknowledged)
  11.5 s  operator: mode on                    -> position republished, q.test clear
  12.5 s  SCADA close request                  -> refused: interlock bay2 blocked
  13.0 s  bay 2 enables again; 13.5 s close    -> close
  14.0 s  the breaker mechanism sticks (device fault)
  15.0 s  protection trip                      -> TRIP, no open: breaker failure after
                                                  150 ms, RBRF published, re-trip
  16.0 s  operator runs `isolate bay=1` (agent)

With `signed=True` (what `goosectl demo` runs) the protection IED signs its stream
(IEC 62351-6, the demo's built-in key) and the controller requires it; three attacks on
the trip follow, none acted on, all three refused on the timeline (the forgeries by the
authentication gate, the replay by the receive rules: its stNum is one the stream passed):

  17.0 s  a forged trip: the stream's addresses, confRev, the next stNum, no MAC
  17.5 s  a forged trip signed with a key id the forger guessed, the wrong secret
  18.0 s  a replayed genuine trip: the signed 6.0 s trip frame, sent again
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import Key, KeyFile
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import (
    BitString,
    Boolean,
    GooseFrame,
    Quality,
    UtcTime,
    decode_frame,
    parse_header,
)
from goosectl.protocols.goose.frame import encode_frame
from goosectl.protocols.goose.header import S_BIT
from goosectl.protocols.goose.security import (
    ALGORITHMS,
    DEFAULT_PROFILE,
    PROFILES,
    MacKey,
    parse,
    sign,
)

S = 1_000_000_000
MS = 1_000_000
#: 2026-11-30T00:00:00Z: the scenario's clock, so frames carry plausible `t` values
EPOCH = 1_795_996_800 * S

VLAN_A, VLAN_B = 10, 11
PROT = "PROT1LD0/LLN0$GO$trip"
CILO = "BAY2LD0/LLN0$GO$cilo"
SCADA = "SCADA1LD0/LLN0$GO$cmd"


#: the substation's IEDs and the test set: locally administered source MACs
IED_SRC = "02:00:00:00:10:01"
TEST_SET_SRC = "02:00:00:00:99:01"
#: when the test set's simulated stream reaches the controller (it is plugged in briefly)
SIM_WINDOW = (2.0, 2.6)
#: when bay 2's frames do not reach the controller, and when it publishes again
CILO_SILENT = (3.9, 6.8)


def _pub(
    gocb: str,
    appid: int,
    dst: str,
    members: list,
    initial: list,
    vlan=None,
    name: str | None = None,
    src: str = IED_SRC,
    simulation: bool = False,
) -> dict:
    return {
        "name": name or gocb,
        "gocb_ref": gocb,
        "dat_set": gocb.replace("$GO$", "$ds"),
        "appid": appid,
        "dst": dst,
        "members": members,
        "initial": initial,
        "vlan": vlan,
        "src": src,
        "simulation": simulation,
        "min_time_ms": 4,
        "max_time_ms": 1000,
    }


_FALSE = {"type": "boolean", "value": False}
_TRUE = {"type": "boolean", "value": True}
_GOOD = {"type": "bit-string", "value": "0000000000000"}


def _prot(vlan_id: int, name: str, **kw: Any) -> dict:
    """The protection IED's stream (trip, quality) on the VLAN of one network."""
    return _pub(
        PROT,
        0x1001,
        "01:0c:cd:01:00:01",
        ["boolean", "bit-string/13"],
        [_FALSE, _GOOD],
        vlan={"id": vlan_id, "priority": 6},
        name=name,
        **kw,
    )


def publishers_config() -> GooseConfig:
    return GooseConfig.model_validate(
        {
            "publishers": [
                # the protection IED's one stream, sent on both networks (A/B by VLAN)
                _prot(VLAN_A, "prot-A"),
                _prot(VLAN_B, "prot-B"),
                _pub(CILO, 0x1002, "01:0c:cd:01:00:02", ["boolean"], [_TRUE]),
                _pub(SCADA, 0x1003, "01:0c:cd:01:00:03", ["boolean"], [_FALSE]),
            ]
        }
    )


def test_set_config() -> GooseConfig:
    """A test set simulating the protection IED (LPHD.Sim): the same stream, `simulation`
    TRUE and the S-bit set, from its own MAC, on network A."""
    return GooseConfig.model_validate(
        {"publishers": [_prot(VLAN_A, "prot-sim", src=TEST_SET_SRC, simulation=True)]}
    )


#: The demo's key: public (it is in the source), so it authenticates nothing outside the demo.
DEMO_KEY_ID = 7
DEMO_SECRET = bytes.fromhex("676f6f736563746c2064656d6f206b6579206e6f742061207365637265742121")


def demo_keys() -> KeyFile:
    """The demo's key file, in memory: one HMAC-SHA256-128 key valid around the scenario."""
    key = MacKey(DEMO_KEY_ID, ALGORITHMS["hmac-sha256-128"], DEMO_SECRET)
    day = 86_400 * S
    return KeyFile("demo (built in)", {DEMO_KEY_ID: Key(key, EPOCH - day, EPOCH + day)}, 60 * S)


@dataclass
class Scenario:
    frames: list[tuple[int, bytes]] = field(default_factory=list)  # (utc ns, bytes)
    faults: list[tuple[int, str, object]] = field(default_factory=list)  # device injections
    #: operator requests to the agent layer: (time, procedure, parameters)
    agent: list[tuple[int, str, dict]] = field(default_factory=list)
    #: the operator switching the controller's mode: (time, mode)
    modes: list[tuple[int, str]] = field(default_factory=list)
    script: list[tuple[int, str]] = field(default_factory=list)
    end_ns: int = 0
    #: the keys the protection stream is signed with (None: an unsigned scenario)
    keys: KeyFile | None = None

    def write_pcap(self, path) -> int:
        with PcapWriter(path) as w:
            for ts, data in self.frames:
                w.write(data, ts)
        return len(self.frames)


#: The script, in the order written (same-time entries keep it): (seconds of virtual time,
#: the caption on the timeline ("" for none), what happens). What happens is a stream
#: published (("scada" | "cilo" | "sim", value), ("trip", value, quality) on both networks),
#: the operator (("mode", mode), ("agent", procedure, parameters)), a device fault
#: (("stuck",)), or None: a caption only. A time given as a name is one of `build`'s
#: arguments (network A's outage).
_SCRIPT: tuple[tuple[float | str, str, tuple[Any, ...] | None], ...] = (
    (0.5, "SCADA close request", ("scada", True)),
    (0.8, "", ("scada", False)),
    (SIM_WINDOW[0], "simulated trip from a test set (controller not in simulation)", ("sim", True)),
    (2.3, "", ("sim", False)),
    (3.0, "protection trip with Tr.q invalid", ("trip", True, "invalid")),
    (3.3, "", ("trip", False, "good")),
    (CILO_SILENT[0], "bay 2 falls silent", None),
    (4.5, "protection trip with Tr.q test (mode on)", ("trip", True, "test")),
    (4.8, "", ("trip", False, "good")),
    (6.0, "protection trip", ("trip", True, "good")),
    (6.5, "", ("trip", False, "good")),
    (6.5, "SCADA close request (bay 2 lost)", ("scada", True)),
    (6.7, "", ("scada", False)),
    (CILO_SILENT[1], "bay 2 is back", ("cilo", True)),
    (7.0, "SCADA close request", ("scada", True)),
    (7.3, "", ("scada", False)),
    ("outage_start", "network A goes silent", None),
    (9.0, "protection trip (network B only)", ("trip", True, "good")),
    (9.5, "", ("trip", False, "good")),
    (10.0, "bay 2 withdraws close enable", ("cilo", False)),
    (10.5, "operator: mode test", ("mode", "test")),
    (10.8, "protection test trip (Tr.q test)", ("trip", True, "test")),
    (11.1, "", ("trip", False, "test")),
    (11.3, "", ("trip", False, "good")),
    (11.5, "operator: mode on", ("mode", "on")),
    ("outage_end", "network A is back", None),
    (12.5, "SCADA close request (interlocked)", ("scada", True)),
    (12.8, "", ("scada", False)),
    (13.0, "bay 2 enables close", ("cilo", True)),
    (13.5, "SCADA close request", ("scada", True)),
    (13.8, "", ("scada", False)),
    (14.0, "breaker mechanism sticks (device fault)", ("stuck",)),
    (15.0, "protection trip (stuck breaker)", ("trip", True, "good")),
    (15.5, "", ("trip", False, "good")),
    (16.0, "operator runs `isolate bay=1` (agent)", ("agent", "isolate", {"bay": 1})),
)
#: The attacks of a signed scenario, after the script: the genuine 6.0 s trip recorded as an
#: attacker records it, two forgeries of it (no MAC; a guessed key id with the wrong
#: secret), and the recorded frame sent again.
_ATTACKS: tuple[tuple[float | str, str, tuple[Any, ...] | None], ...] = (
    (6.0, "", ("record",)),
    (17.0, "forged trip: right addresses, next stNum, no MAC", ("forge", False)),
    (17.5, "forged trip signed with a guessed key id, wrong secret", ("forge", True)),
    (18.0, "replayed genuine trip (the 6.0 s frame again)", ("replay",)),
)


def build(duration_s: float = 20.0, outage=(8.0, 11.0), signed: bool = False) -> Scenario:
    """Frames of every publisher over `duration_s` seconds of virtual time; `signed`: the
    protection stream signed and the three attacks on it (module docstring)."""
    keys = demo_keys() if signed else None
    rec = _Recorder(_hub(keys), Scenario(end_ns=EPOCH + int(duration_s * S), keys=keys), outage)
    named = {"outage_start": outage[0], "outage_end": outage[1]}
    actions = [
        (named[at] if isinstance(at, str) else at, text, what)
        for at, text, what in (*_SCRIPT, *(_ATTACKS if signed else ()))
    ]
    rec.emit(rec.hub.start(EPOCH, EPOCH), EPOCH)
    actions.sort(key=lambda a: a[0])  # stable: same-time actions keep their order
    for at, text, what in actions:
        t = EPOCH + int(at * S)
        rec.run_until(t)
        if text:
            rec.scn.script.append((t, text))
        if what is not None:
            getattr(rec, "do_" + what[0])(t, *what[1:])
    rec.run_until(rec.scn.end_ns)
    rec.scn.frames.sort(key=lambda f: f[0])
    return rec.scn


def _hub(keys: KeyFile | None) -> GooseHub:
    """The scenario's publishers and the test set's on one hub; the protection stream
    signed when there are keys."""
    pubs = [*publishers_config().publishers, *test_set_config().publishers]
    if keys is not None:
        pubs = [
            p.model_copy(update={"auth": "sign", "key_id": DEMO_KEY_ID})
            if p.name in ("prot-A", "prot-B", "prot-sim")
            else p
            for p in pubs
        ]
    return GooseHub(GooseConfig(publishers=pubs), keys=keys)


def _window(span: tuple[float, float]) -> tuple[int, int]:
    """A span of the script's seconds on the scenario's clock."""
    return (EPOCH + int(span[0] * S), EPOCH + int(span[1] * S))


class _Recorder:
    """The hub driven on the virtual clock, its frames kept as they reach the controller
    (or not: the outages), and the script's actions (`do_*`, one per kind of entry)."""

    def __init__(self, hub: GooseHub, scn: Scenario, outage: tuple[float, float]) -> None:
        self.hub = hub
        self.scn = scn
        # two publishers share the protection gocbRef (A and B copies): key them by name
        self.by_name = {p.cfg.name: p for p in hub.publishers.values()}
        self.a_out = _window(outage)
        self.sim_on = _window(SIM_WINDOW)
        self.cilo_off = _window(CILO_SILENT)
        #: the last frame network A carried of the protection stream, and the recorded trip
        self.last_prot: list[bytes] = []
        self.recorded = b""
        self.quality = {
            "good": Quality().to_bitstring(),
            "invalid": Quality(validity="invalid").to_bitstring(),
            "test": Quality(test=True).to_bitstring(),
        }

    def keep(self, e: SendFrame, t: int) -> None:
        hdr = parse_header(e.data)
        vlan = hdr.vlan
        if vlan is not None and vlan.id == VLAN_A and self.a_out[0] <= t < self.a_out[1]:
            return  # network A is down: its copies never reach the controller
        if hdr.reserved1 & S_BIT and not self.sim_on[0] <= t < self.sim_on[1]:
            return  # the test set is plugged in only for a moment
        if e.gocb_ref == CILO and self.cilo_off[0] <= t < self.cilo_off[1]:
            return  # bay 2's link is down
        if e.gocb_ref == PROT and vlan is not None and vlan.id == VLAN_A and not hdr.simulation:
            self.last_prot[:] = [e.data]
        self.scn.frames.append((t, e.data))

    def emit(self, effects, t: int) -> None:
        for e in effects:
            if type(e) is SendFrame:
                self.keep(e, t)

    def publish(self, name: str, values: tuple, t: int) -> None:
        self.hub.scheduler.feed(self.by_name[name].id, "publish", t, (values, t))
        self.emit(self.hub.drain(), t)

    def run_until(self, t: int) -> None:
        _run_until(self.hub, t, self.emit)

    def do_scada(self, t: int, value: bool) -> None:
        self.publish(SCADA, (Boolean(value),), t)

    def do_cilo(self, t: int, value: bool) -> None:
        self.publish(CILO, (Boolean(value),), t)

    def do_sim(self, t: int, value: bool) -> None:
        self.publish("prot-sim", (Boolean(value), self.quality["good"]), t)

    def do_trip(self, t: int, value: bool, quality: str) -> None:
        _trip(self.publish, value, self.quality[quality], t)

    def do_mode(self, t: int, mode: str) -> None:
        self.scn.modes.append((t, mode))

    def do_agent(self, t: int, procedure: str, params: dict) -> None:
        self.scn.agent.append((t, procedure, params))

    def do_stuck(self, t: int) -> None:
        self.scn.faults.append((t, "stuck", True))

    def do_record(self, t: int) -> None:
        self.recorded = self.last_prot[0]

    def do_forge(self, t: int, guessed_key: bool) -> None:
        key = MacKey(DEMO_KEY_ID, ALGORITHMS["hmac-sha256-128"], bytes(32)) if guessed_key else None
        self.scn.frames.append((t, _forged(self.last_prot[0], t, key)))

    def do_replay(self, t: int) -> None:
        self.scn.frames.append((t, self.recorded))


def _forged(genuine: bytes, t: int, key: MacKey | None) -> bytes:
    """What a forger makes of a captured frame of the protection stream: the same header,
    the next stNum, the trip member set, a fresh `t`; signed with `key` if given."""
    profile = PROFILES[DEFAULT_PROFILE]
    ext = parse(genuine, profile)
    f = decode_frame(ext.unsigned if ext is not None else genuine)
    fields = {name: getattr(f, name) for name in GooseFrame.__dataclass_fields__}
    fields.update(
        st_num=f.st_num + 1,
        sq_num=0,
        all_data=(Boolean(True), *f.all_data[1:]),
        t=UtcTime.from_ns(t, f.t.quality),
        trailer=b"",
    )
    raw = encode_frame(GooseFrame(**fields))
    return raw if key is None else sign(raw, key, profile)


def _trip(publish, value: bool, q: BitString, t: int) -> None:
    for side in ("prot-A", "prot-B"):
        publish(side, (Boolean(value), q), t)


def _run_until(hub: GooseHub, t: int, emit) -> None:
    while (d := hub.next_deadline()) is not None and d <= t:
        emit(hub.advance(d), d)
