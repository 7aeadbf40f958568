"""`goosectl demo --live` (root): the demo on real wires, libiec61850 as the protection IED.

Two network namespaces joined by a veth pair. In the substation's: libiec61850's publisher
is the protection IED (PTRC trip), goosectl's publishers are bay 2 (CILO) and SCADA. In the
controller's: the bay controller's live shell (raw sockets, the monotonic clock), the
breaker simulator on a real pty (`goosectl sim`). The script: close, trip, close again,
the mechanism sticks, trip -> breaker failure. The timeline is wall-clock time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.errors import CommandError
from goosectl.controller.report.bay_report import Timeline, percentiles, report_block
from goosectl.controller.shell.journal_store import open_journal
from goosectl.protocols.files import write_new

if TYPE_CHECKING:  # loaded by the run only: an installed controller starts without them
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.shell.live_bay import BayLive

IFACE = "net0"
#: (seconds after start, what, value): the substation's side of the script
SCRIPT = [
    (0.8, "scada", True),
    (1.0, "scada", False),
    (2.0, "trip", True),
    (2.5, "trip", False),
    (3.0, "scada", True),
    (3.2, "scada", False),
    (4.2, "trip", True),
    (4.7, "trip", False),
]
STUCK_AT = 3.8  # the breaker mechanism sticks (device fault) before the second trip


def peer(iface: str) -> int:
    """The substation: libiec61850 publishes the trip, goosectl publishes CILO and SCADA."""
    from goosectl.controller.config.goose import GooseConfig
    from goosectl.controller.demo.scenario import CILO, SCADA, publishers_config
    from goosectl.controller.goose.hub import GooseHub
    from goosectl.protocols.ethernet.rawsock import RawSocket

    prot = _protection_ied(iface)
    ours = [p for p in publishers_config().publishers if p.gocb_ref in (CILO, SCADA)]
    hub = GooseHub(GooseConfig(publishers=ours))
    substation = _Substation(prot, hub, RawSocket(iface, timestamps=False))
    substation.start()
    substation.play(list(SCRIPT), 6.0)
    prot.close()
    return 0


def _protection_ied(iface: str) -> Any:
    """libiec61850's publisher of the protection IED's trip stream."""
    from goosectl.lab.iec61850_peer import Publisher

    return Publisher(
        iface,
        appid=0x1001,
        dst=bytes.fromhex("010ccd010001"),
        vlan_id=10,
        vlan_prio=6,
        gocb_ref="PROT1LD0/LLN0$GO$trip",
        dataset="PROT1LD0/LLN0$dstrip",
        go_id="PROT1",
        tal_ms=2000,
    )


class _Substation:
    """The substation's side of the script on the wall clock: the protection IED's trip
    (retransmitted by us, as libiec61850 leaves that to the application) and SCADA's close
    requests from goosectl's own publisher."""

    def __init__(self, prot: Any, hub: Any, sock: Any) -> None:
        self.prot = prot
        self.hub = hub
        self.sock = sock
        self.q: dict[str, Any] = {"type": "bit-string", "bits": "0000000000000"}
        self.values: list[dict[str, Any]] = [{"type": "boolean", "value": False}, self.q]
        self.t0 = time.monotonic()
        self.sent_prot = self.t0 - 10.0

    def send(self, effects) -> None:
        for e in effects:
            if hasattr(e, "data"):
                self.sock.send(e.data)

    def start(self) -> None:
        """Every stream's first state sent, then "ready" (the script's time counts from
        the substation's start)."""
        self.send(self.hub.start(time.monotonic_ns(), time.time_ns()))
        self.prot.publish(self.values)
        print("ready", flush=True)

    def play(self, script: list[tuple[float, str, bool]], seconds: float) -> None:
        """The script's steps as their times come, retransmissions and heartbeats between."""
        t0 = self.t0
        while time.monotonic() - t0 < seconds:
            now = time.monotonic()
            if script and now - t0 >= script[0][0]:
                _, what, value = script.pop(0)
                self.act(what, value, now)
            if now - self.sent_prot >= 0.5:  # libiec61850 retransmissions: the app paces them
                self.prot.publish(self.values)
                self.sent_prot = now
            d = self.hub.next_deadline()
            if d is not None and d <= time.monotonic_ns():
                self.send(self.hub.advance(time.monotonic_ns()))
            time.sleep(0.001)

    def act(self, what: str, value: bool, now: float) -> None:
        """A trip state from the protection IED, or a close request from SCADA."""
        from goosectl.controller.demo.scenario import SCADA
        from goosectl.protocols.goose import Boolean

        if what == "trip":
            self.values = [{"type": "boolean", "value": value}, self.q]
            self.prot.new_state()
            self.prot.publish(self.values)
            self.sent_prot = now
        else:
            self.hub.scheduler.feed(
                f"pub:{SCADA}", "publish", time.monotonic_ns(), ((Boolean(value),), time.time_ns())
            )
            self.send(self.hub.drain())


def run_live_demo(args: argparse.Namespace) -> int:
    """The live demo in two namespaces it makes; the report written and printed."""
    _require_live()
    from goosectl.lab.netns import NetLab

    folder = args.out or Path(tempfile.mkdtemp(prefix="goosectl-demo-live-"))
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    cfg = load_config(
        args.config if args.config else DEFAULT_CONFIG, ControllerConfig, getattr(args, "ied", None)
    )
    print(f"goosectl demo --live: writing to {folder}/", flush=True)
    device = DeviceThread(spring_ms=300)
    with NetLab() as lab:
        sub, ctl = lab.namespace(), lab.namespace()
        lab.veth(sub, ctl, a=IFACE, b=IFACE)
        device.start()
        try:
            bay, live, timeline = _play_live(cfg, folder, sub, ctl, device)
        finally:
            device.stop()
    lines = [
        *report_block(
            "wall clock",
            timeline.lines(),
            timeline.anomalies(),
            "live, per frame: socket read -> effects out",
            {"frame in -> effects out": percentiles(list(live.live.latencies))},
        ),
        "",
        f"final bay state: {bay.bay.state}; journal {folder / 'journal.sqlite'}",
    ]
    text = "\n".join(lines)
    write_new(folder / "report.txt", text + "\n")
    print(text)
    return 0


def _require_live() -> None:
    """libiec61850's bindings and root, or a clear error saying which is missing."""
    import os

    try:
        import pyiec61850.pyiec61850  # noqa: F401
    except ImportError as exc:
        raise CommandError(
            "demo --live: libiec61850's Python bindings (pyiec61850-ng) are not installed: "
            "install the `live` extra, pip install -e '.[live]'"
        ) from exc
    if os.geteuid() != 0:
        raise CommandError(
            "demo --live needs root (network namespaces and raw sockets): "
            "sudo .venv/bin/goosectl demo --live"
        )


def _play_live(
    cfg: ControllerConfig, folder: Path, sub: Any, ctl: Any, device: DeviceThread
) -> tuple[BayController, BayLive, Timeline]:
    """The controller's live shell in `ctl`, the substation's peer in `sub`, the script
    played; (the bay, its live shell, the timeline of what it did)."""
    from goosectl.controller.logic.core import BayController
    from goosectl.controller.shell.live_bay import BayLive

    journal = open_journal(folder / "journal.sqlite", durability="group")
    bay = BayController(cfg, time.monotonic_ns(), journal)
    with ctl.entered():
        live = BayLive(bay, IFACE, None, device.path, status_every=False)
    t0 = time.monotonic_ns()
    timeline = Timeline(t0)

    def note(effects: list[Any]) -> None:
        for e in effects:
            timeline.add(time.monotonic_ns(), e)

    live.on_effects = note
    ied = sub.python_module("goosectl.controller.demo.live", "peer", "--iface", IFACE)
    # the script's times count from the peer's start, and an interpreter can take a
    # second to start: the device's fault is timed from the peer's "ready", not ours
    out, err = ied.stdout, ied.stderr
    assert out is not None and err is not None  # python_module pipes both
    ready = out.readline()
    if ready.strip() != "ready":
        raise RuntimeError(f"the protection IED did not start: {ready}{err.read()}")
    started = time.monotonic()
    device.inject_at(started + STUCK_AT, "stuck", True)
    print("running the script for 6 s ...", flush=True)
    live.run(until_ns=int((started + 6.5) * 1e9))
    ied.wait(timeout=10)
    journal.close()
    return bay, live, timeline


class DeviceThread:
    """The breaker simulator on a new pty, served by a thread; faults injected between two
    polls of its loop, never racing it."""

    def __init__(self, spring_ms: int) -> None:
        from goosectl.firmware_sim.core import Firmware
        from goosectl.firmware_sim.shell import DeviceShell
        from goosectl.firmware_sim.transport import PtyTransport

        self.transport = PtyTransport()
        self.path = self.transport.path
        now = time.monotonic_ns()
        fw = Firmware(now_ns=now, config={"spring": {"spring_charge_ms": spring_ms}})
        self.shell = DeviceShell(self.transport, firmware=fw)
        self.pending: list[tuple[float, str, object]] = []
        self._stop = threading.Event()
        self._held = threading.Event()
        self._holding = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="device", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def hold(self) -> None:
        """From now on the board reads nothing (a busy board): what is written to it waits
        in the pty until `release`. Returns once its loop has stopped reading."""
        self._held.set()
        if not self._holding.wait(timeout=5):
            raise RuntimeError("the device thread did not stop reading within 5 s")

    def release(self) -> None:
        self._held.clear()

    def inject_at(self, when: float, what: str, value: object) -> None:
        self.pending.append((when, what, value))

    def _loop(self) -> None:
        import select

        fd = self.shell.fileno()
        while not self._stop.is_set():
            if self._held.is_set():
                self._holding.set()
                time.sleep(0.001)
                continue
            self._holding.clear()
            select.select([fd], [], [], 0.001)
            now = time.monotonic_ns()
            while self.pending and self.pending[0][0] <= time.monotonic():
                _, what, value = self.pending.pop(0)
                self.shell.fw.inject(what, value, now)
            self.shell.poll(now)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.transport.close()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m goosectl.controller.demo.live")
    sub = p.add_subparsers(dest="cmd", required=True)
    pe = sub.add_parser("peer")
    pe.add_argument("--iface", required=True)
    args = p.parse_args(argv)
    return peer(args.iface)


if __name__ == "__main__":
    sys.exit(main())
