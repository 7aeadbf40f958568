"""Everything GOOSE on one scheduler: subscriptions, publishers, their timers, one effect list.

The hub is the pure boundary the shells (live sockets, pcap replay, the bay controller)
talk to: give it frames, publications and time; take back `SendFrame`s to put on the
wire and reports (`FrameClassified`, `StreamState`, `LgosView`, `PublisherSides`) to show
or act on. What the hub cannot know by itself the shell tells it: the source MAC of the
interface (`set_source_mac`), the time quality of the host clock (`set_time_quality`);
without them a replay's output is deterministic (`publisher.REPLAY_SRC`,
`publisher.VIRTUAL_TIME_QUALITY`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.keys import KeyFile
from goosectl.controller.engine import Journal, Scheduler
from goosectl.controller.goose.auth import AuthGate, Signer
from goosectl.controller.goose.effects import (
    FrameClassified,
    LgosChanged,
    SendFrame,
    StreamState,
    Transmit,
)
from goosectl.controller.goose.publisher import STATUS_FIELDS, Publisher, load_table
from goosectl.controller.goose.subscriber import SubscriberBank
from goosectl.protocols.goose import Vlan
from goosectl.protocols.goose.security import PROFILES

Report = Callable[[Any], None]


class GooseHub:
    def __init__(
        self,
        config: GooseConfig | None = None,
        journal: Journal | None = None,
        scheduler: Scheduler | None = None,
        simulation: bool = False,
        keys: KeyFile | None = None,
        auth_default: str = "off",
    ) -> None:
        """`keys`: the loaded key file (`goose.keys`); `auth_default`: the policy of frames
        of no configured subscription (`listen --keys` reports every frame's verdict)."""
        config = config or GooseConfig()
        self.scheduler = scheduler or Scheduler(journal)
        self.out: list[Any] = []
        # every other effect (a bay's or an input machine's on a shared scheduler) is a
        # report for whoever drains the hub
        self.scheduler.route(
            {
                Transmit: self._transmit,
                StreamState: self._stream_state,
                LgosChanged: self._lgos_changed,
            },
            default=self._report,
        )
        self.bank = SubscriberBank(
            self.scheduler,
            config.subscriptions,
            simulation=simulation,
            max_streams=config.max_streams,
            receive=config.receive,
            auth=AuthGate(
                self.scheduler, config.subscriptions, keys, config.auth_profile, auth_default
            ),
        )
        self.publishers: dict[str, Publisher] = {}
        self.by_gocb: dict[str, Publisher] = {}
        self._pub_table = load_table()
        #: UTC minus the loop's clock (`set_utc_offset`), for the keys' windows
        self.utc_offset_ns = 0
        #: publisher id -> its signer (publications with `auth: sign`)
        self.signers: dict[str, Signer] = {}
        for cfg in config.publishers:
            pub = Publisher(cfg)
            self.publishers[pub.id] = pub
            self.by_gocb[cfg.gocb_ref] = pub
            if cfg.auth == "sign" and cfg.key_id is not None:
                profile = PROFILES[config.auth_profile]
                self.signers[pub.id] = Signer(keys, cfg.key_id, profile)
        self._started = False

    # -- effect routing (by exact type, on the scheduler) ----------------------------------

    def _transmit(self, machine_id: str, e: Transmit, now_ns: int) -> None:
        frame = self.publishers[machine_id].frame(e)
        signer = self.signers.get(machine_id) if self.signers else None
        if signer is not None:
            data = signer.sign(frame.data, now_ns + self.utc_offset_ns)
            if data is None:
                return  # no key in force: never an unsigned frame (counted by the signer)
            frame = SendFrame(frame.gocb_ref, frame.sides, data)
        self.out.append(frame)

    def _stream_state(self, machine_id: str, e: StreamState, now_ns: int) -> None:
        self.out.append(e)
        if e.side in ("A", "B"):
            self.bank.on_side_state(e, now_ns)
        elif e.state == "lost":
            self.bank.on_stream_lost(e, now_ns)

    def _lgos_changed(self, machine_id: str, e: LgosChanged, now_ns: int) -> None:
        self.out.append(self.bank.view(e.stream))

    def _report(self, machine_id: str, e: Any, now_ns: int) -> None:
        self.out.append(e)

    @property
    def started(self) -> bool:
        """The publishers run (`start` was called)."""
        return self._started

    def drain(self) -> list[Any]:
        out, self.out = self.out, []
        return out

    # -- inputs -----------------------------------------------------------------------------

    def start(self, now_ns: int, utc_ns: int, muted: bool = False) -> list[Any]:
        """Start every publisher with its initial values (its first state, stNum 1);
        `muted`: the controller starts in mode off, nothing is sent until `mute(False)`."""
        for pub in self.publishers.values():
            self.scheduler.start(pub.machine(self._pub_table, muted), now_ns)
            if pub.cfg.initial:
                self.scheduler.feed(pub.id, "publish", now_ns, (pub.initial_values(), utc_ns))
        self._started = True
        return self.drain()

    def frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None) -> list[Any]:
        """Judge one frame. The effects always hold exactly one `FrameClassified` for it."""
        judged = self.bank.on_frame(buf, side, now_ns, vlan)
        stream, hdr, status = judged.stream, judged.header, judged.status
        if status == "repeat":  # the fast path's own report (no dispatch, see subscriber)
            out = self.out
            if not out:
                return [hdr]
            out.append(hdr)
        elif status == "auth_refused":
            reason = hdr.reason if hdr is not None else "unsigned"
            self.out.append(
                FrameClassified(
                    stream.id if stream is not None else "",
                    side,
                    "auth_refused",
                    (reason,),
                    "-",
                    False,
                    0,
                    0,
                    refused=f"auth_{reason}",
                )
            )
        elif status != "judged":
            foreign = status == "foreign_source"
            self.out.append(
                FrameClassified(
                    stream.id if stream is not None else "",
                    side,
                    status,
                    ("foreign_source",) if foreign else (),
                    "-",
                    False,
                    hdr.st_num if hdr is not None else 0,
                    hdr.sq_num if hdr is not None else 0,
                    refused="foreign_source" if foreign else None,
                )
            )
        return self.drain()

    def publish(self, gocb_ref: str, values: tuple, now_ns: int, utc_ns: int) -> list[Any]:
        """A new state for a publisher; a type mismatch raises `PublishError`, nothing sent."""
        pub = self.by_gocb.get(gocb_ref)
        if pub is None:
            raise KeyError(f"no publisher for gocbRef {gocb_ref!r}")
        self.scheduler.feed(pub.id, "publish", now_ns, (tuple(values), utc_ns))
        return self.drain()

    def skip_states(self, gocb_ref: str, by: int, now_ns: int) -> list[Any]:
        """The publisher's next new state jumps `by` stNums instead of one (a test set's
        missed-state injection, `publish --stnum-jump`)."""
        self.scheduler.feed(self.by_gocb[gocb_ref].id, "skip_states", now_ns, by)
        return self.drain()

    def set_simulation(self, on: bool, now_ns: int) -> list[Any]:
        """The controller's simulation mode (LPHD.Sim) for every subscription."""
        self.bank.set_simulation(on, now_ns)
        return self.drain()

    def mute(self, muted: bool, now_ns: int) -> list[Any]:
        """Stop (or resume) every publisher's frames: the controller's mode is `off`."""
        for pub in self.publishers.values():
            if pub.id in self.scheduler.machines:
                self.scheduler.feed(pub.id, "mute" if muted else "unmute", now_ns)
        return self.drain()

    def set_source_mac(self, mac: bytes) -> None:
        """The interface's own MAC, for every publisher without a configured `src`."""
        for pub in self.publishers.values():
            pub.set_source(mac)

    def set_time_quality(self, quality: int) -> None:
        """The time quality octet of `t` from now on (the shell reads the host clock)."""
        for pub in self.publishers.values():
            pub.time_quality = quality

    def lgos(self) -> list[Any]:
        """The LGOS view of every subscription."""
        return self.bank.views()

    def link(self, side: str, up: bool, now_ns: int) -> list[Any]:
        for pub in self.publishers.values():
            self.scheduler.feed(pub.id, "link_up" if up else "link_down", now_ns, side)
        return self.drain()

    def advance(self, now_ns: int) -> list[Any]:
        self.scheduler.advance(now_ns)
        return self.drain()

    def next_deadline(self) -> int | None:
        return self.scheduler.timers.next_deadline()

    def set_keys(self, keys: KeyFile | None) -> None:
        """A reloaded key file (SIGHUP, a control request): the next frame uses it."""
        if self.bank.auth is not None:
            self.bank.auth.set_keys(keys)
        for signer in self.signers.values():
            signer.keys = keys

    def set_iv_prefix(self, prefix: bytes) -> None:
        """Six random octets from the shell: the per-process part of every GMAC IV."""
        for signer in self.signers.values():
            signer.iv_prefix = prefix

    def set_utc_offset(self, offset_ns: int) -> None:
        """UTC minus the loop's clock, for the keys' windows (the shell reads both)."""
        self.utc_offset_ns = offset_ns
        if self.bank.auth is not None:
            self.bank.auth.utc_offset_ns = offset_ns

    def counters(self) -> dict[str, Any]:
        c = self.bank.counters()
        if self.bank.auth is not None:
            c["auth"] = self.bank.auth.counters()
        if self.signers:
            c["signed"] = {
                self.publishers[pid].cfg.gocb_ref: {"signed": s.signed, "no_key": s.unsigned}
                for pid, s in self.signers.items()
            }
        c["publishers"] = {
            p.cfg.gocb_ref: {k: self.scheduler.machines[p.id].ctx[k] for k in STATUS_FIELDS}
            | {"state": self.scheduler.machines[p.id].state}
            for p in self.publishers.values()
            if p.id in self.scheduler.machines
        }
        return c
