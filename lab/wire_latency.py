"""Transition latency on the wire: trip frame sent by a peer -> trip-acknowledged frame back.

Two namespaces joined by a veth pair. In one, `goosectl run` (the real live shell) with the
breaker simulator on a pty (`goosectl sim --pty`, a separate process: the TRIP really
crosses a tty). In the other, this process plays the substation: the protection IED, bay
2's CILO and SCADA (goosectl's own publishers, heartbeats included), and takes every
timestamp on its side: trip frame sent -> trip-acknowledged frame received. Between
samples the breaker is re-closed over GOOSE (SCADA close request); the simulator runs
without anti-pumping and with 10 ms operating times, so a sample takes tens of ms.
Optionally a loader process adds 50 unrelated streams at 5,000 frames/s in total, paced by
sleeping, so the load is frames, not a stolen core.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

import yaml

from goosectl.controller.config.bay import DEFAULT_CONFIG
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.demo.scenario import CILO, SCADA, publishers_config
from goosectl.controller.goose.hub import GooseHub
from goosectl.lab.netns import Namespace, NetLab
from goosectl.protocols.ethernet.rawsock import RawSocket
from goosectl.protocols.goose import (
    Boolean,
    Dbpos,
    FrameTemplate,
    GooseFrame,
    Quality,
    UtcTime,
    parse_header,
)

MS = 1_000_000
IFACE = "net0"
#: between the re-close's last frame and the trip
QUIET_S = 0.005
#: The lab cycles the breaker ~30 times a second: every publisher's rate limit (20 new
#: states a second by default, a defence against a chattering device), the controller's
#: and the peer's, is raised so the lab measures the trip, not a limit holding a frame back
LAB_MAX_CHANGES = 1000
#: the peer's priority (`peer_fifo`): above normal tasks, below `run --realtime` (50)
PEER_FIFO_PRIORITY = 40


@contextlib.contextmanager
def peer_fifo(priority: int = PEER_FIFO_PRIORITY) -> Iterator[None]:
    """This process (the peer) SCHED_FIFO for the block; its policy restored after.

    The peer stands for another device (the protection IED on its own hardware), not for
    one more task on the controller's host. Its send time is taken just before the send,
    so a peer preempted there (by CPU hogs, or other work on a shared machine) adds its own
    wait to the trip: under a CPU hog per core, `run --realtime`'s max was 18 ms with an
    ordinary peer, 0.98 ms with a SCHED_FIFO one, same minute."""
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    try:
        yield
    finally:
        os.sched_setscheduler(0, policy, param)


def lab_config(folder: Path) -> Path:
    """The default bay configuration with the lab's publication rate limit."""
    cfg = yaml.safe_load(DEFAULT_CONFIG.read_text())
    for pub in cfg["goose"]["publishers"]:
        pub["max_changes"] = LAB_MAX_CHANGES
    path = folder / "bay-lab.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


class WireTrip:
    def __init__(
        self,
        load_fps: int = 0,
        load_streams: int = 50,
        spring_ms: int = 20,
        spin: bool = False,
        realtime: bool = False,
        cpu_latency_us: int | None = None,
        load_dst: str = "010ccd0100ff",
        reflex: bool | None = None,
        keep_warm_ms: float | None = None,
    ) -> None:
        self.spin = spin
        #: `run --reflex` / `--no-reflex` (docs/reflex.md); None: as `run` ships
        self.reflex = reflex
        #: `run --keep-warm-ms` (docs/reflex.md, Keep-warm); None: as `run` ships
        self.keep_warm_ms = keep_warm_ms
        #: the load's destination MAC (hex): the default is no subscription's; the
        #: protection trip's own (010ccd010001) makes it a flood on the subscribed address
        self.load_dst = load_dst
        self.realtime = realtime
        #: `run --cpu-latency-us`: the controller holds the host's CPU wake-up latency
        self.cpu_latency_us = cpu_latency_us
        self.lab = NetLab()
        self.procs: list[subprocess.Popen] = []
        #: frames read past a match, kept for the next wait: a peer late to read gets the
        #: trip-ack and the position change in one batch, and must not drop the second
        self._pending: deque = deque()
        try:
            self._setup(load_fps, load_streams, spring_ms)
        except BaseException:
            self.close()
            raise

    def _setup(self, load_fps: int, load_streams: int, spring_ms: int) -> None:
        peer, ctl = self.lab.namespace(), self.lab.namespace()
        self.lab.veth(peer, ctl, a=IFACE, b=IFACE)
        self.tmp = Path(tempfile.mkdtemp(prefix="goosectl-wire-"))
        sim, path = self._start_sim(spring_ms)
        self._start_controller(ctl, sim, path)
        self._open_substation(peer)
        if load_fps:
            self.procs.append(
                peer.python_module(
                    "goosectl.lab.wire_latency",
                    "load",
                    "--iface",
                    IFACE,
                    "--streams",
                    str(load_streams),
                    "--fps",
                    str(load_fps),
                    "--dst",
                    self.load_dst,
                )
            )
        self.pump_until(lambda h: h.gocb_ref.endswith("$pos") and self._pos(h) == "off", 5.0)
        self.acks = 0

    def _start_sim(self, spring_ms: int) -> tuple[subprocess.Popen, str]:
        """The breaker simulator on a pty of its own: (its process, the pty's path)."""
        sim = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "goosectl",
                "sim",
                "--pty",
                "--link",
                str(self.tmp / "device.pty"),
                "--spring-ms",
                str(spring_ms),
                # the breaker cycles between samples: no anti-pumping window to wait out,
                # short operating times, so a p99 rests on >= 1,000 samples in seconds
                "--anti-pump",
                "0",
                "--open-ms",
                "10",
                "--close-ms",
                "10",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(sim)
        assert sim.stdout is not None and sim.stderr is not None  # both piped above
        path = sim.stdout.readline().strip()
        if not path:
            raise RuntimeError(f"the simulator did not start: {sim.stderr.read()}")
        return sim, path

    def _start_controller(self, ctl: Namespace, sim: subprocess.Popen, path: str) -> None:
        """`goosectl run` in the controller's namespace on the simulator's pty, up and
        running; with --spin, on a CPU of its own."""
        # `run --spin` busy-polls: it is meant for a controller that owns a core (README).
        # Sharing one with the peer or the simulator, a woken peer waits for the spinner's
        # time slice (ms): so the spinner gets the last CPU, everything else the others.
        cpus = sorted(os.sched_getaffinity(0))
        own = cpus[-1] if self.spin and len(cpus) > 1 else None
        run = ctl.popen(
            self._run_argv(path, own),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(run)
        if own is not None:
            rest = set(cpus) - {own}
            self._affinity = os.sched_getaffinity(0)
            os.sched_setaffinity(0, rest)  # the peer: this process
            os.sched_setaffinity(sim.pid, rest)
        assert run.stdout is not None and run.stderr is not None  # both piped above
        line = run.stdout.readline()
        if '"running"' not in line:
            raise RuntimeError(f"goosectl run did not start: {line} {run.stderr.read()}")

    def _run_argv(self, path: str, own: int | None) -> list[str]:
        """The controller's command line: the lab's config, journal and control socket,
        and the options this lab measures."""
        return [
            sys.executable,
            "-m",
            "goosectl",
            "run",
            "--iface",
            IFACE,
            "--port",
            path,
            "--config",
            str(lab_config(self.tmp)),
            # the journal on, as in production (its own folder)
            "--state",
            str(self.tmp / "state"),
            # its own control socket: never the default one a real controller may hold
            "--control",
            str(self.tmp / "control.sock"),
            "--quiet",
            *(["--spin"] if self.spin else []),
            *([] if self.reflex is None else ["--reflex" if self.reflex else "--no-reflex"]),
            *([] if self.keep_warm_ms is None else ["--keep-warm-ms", f"{self.keep_warm_ms:g}"]),
            *(["--realtime"] if self.realtime else []),
            *(["--cpu", str(own)] if own is not None else []),
            *(
                ["--cpu-latency-us", str(self.cpu_latency_us)]
                if self.cpu_latency_us is not None
                else []
            ),
        ]

    def _open_substation(self, peer: Namespace) -> None:
        """The substation's side in the peer's namespace: a raw socket the kernel stamps,
        and its publishers (protection, bay 2, SCADA), started."""
        with peer.entered():
            # the kernel stamps each frame as it arrives: the latency is on the wire,
            # not how soon this (Python) peer was scheduled to read it
            self.sock = RawSocket(IFACE, promiscuous=True, timestamps=True)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.sock, selectors.EVENT_READ)
        # the substation's publishers cycle as fast as the controller's: the same lab limit
        cfg = [
            p.model_copy(update={"max_changes": LAB_MAX_CHANGES})
            for p in publishers_config().publishers
            if p.name in ("prot-A", CILO, SCADA)
        ]
        self.hub = GooseHub(GooseConfig(publishers=cfg))
        self.ids = {p.cfg.name: p.id for p in self.hub.publishers.values()}
        now = time.monotonic_ns()
        self._send(self.hub.start(now, time.time_ns()))

    # -- the substation's side ----------------------------------------------------------

    def _send(self, effects) -> None:
        for e in effects:
            if hasattr(e, "data"):
                self.sock.send(e.data)

    def _publish(self, name: str, values: tuple) -> int:
        self.hub.scheduler.feed(
            self.ids[name], "publish", time.monotonic_ns(), (values, time.time_ns())
        )
        out = self.hub.drain()
        if not any(hasattr(e, "data") for e in out):
            # held back by the publisher's rate limit: sent later, so no time to take now
            raise RuntimeError(f"the peer's {name} publication was not sent at once: {out}")
        t0 = time.time_ns()  # the clock of the kernel's receive stamps (CLOCK_REALTIME)
        self._send(out)
        return t0

    @staticmethod
    def _pos(h) -> str:
        # allData starts with the Dbpos bit-string TLV: 84 02 06 <2 bits in the top of the octet>
        return Dbpos(h.all_data[3] >> 6 & 3).name.lower()

    def pump_until(self, want, timeout_s: float):
        """Serve the peer's heartbeats and read frames until `want(header)`; (header, t)."""
        found = self._pump(want, timeout_s)
        if found is None:
            raise TimeoutError("the controller did not answer in time")
        return found

    def serve(self, seconds: float) -> None:
        """Serve the peer's heartbeats for `seconds`, reading (and ignoring) what arrives."""
        self._pump(lambda h: False, seconds)

    def _pump(self, want, timeout_s: float):
        end = time.monotonic() + timeout_s
        pending = self._pending
        while True:
            while pending:
                rx = pending.popleft()
                try:
                    h = parse_header(rx.frame)
                except Exception:
                    continue
                if h.gocb_ref.startswith("GCTL") and h.sq_num == 0 and want(h):
                    return h, rx.ts_ns or time.time_ns()
            if time.monotonic() >= end:
                return None
            d = self.hub.next_deadline()
            now = time.monotonic_ns()
            if d is not None and d <= now:
                self._send(self.hub.advance(now))
                d = self.hub.next_deadline()
            wait = 0.05 if d is None else max(0.0, min(0.05, (d - time.monotonic_ns()) / 1e9))
            if self.sel.select(wait):
                pending.extend(self.sock.recv_batch())

    def reclose(self) -> None:
        q = Quality().to_bitstring()
        self._publish("prot-A", (Boolean(False), q))
        self._publish(SCADA, (Boolean(True),))
        self.pump_until(lambda h: h.gocb_ref.endswith("$pos") and self._pos(h) == "on", 5.0)
        self._publish(SCADA, (Boolean(False),))
        # the trip comes to a controller that has handled the close request's reset: sent
        # right behind it, the trip was read in the same batch and waited for it (the
        # loaded runs measure a trip among other frames)
        self.serve(QUIET_S)

    def sample(self) -> int:
        """One trip: ns from the trip frame sent to the trip-acknowledged frame arriving
        at the peer's interface (kernel receive stamp)."""
        self.reclose()
        t0 = self._publish("prot-A", (Boolean(True), Quality().to_bitstring()))
        _, t1 = self.pump_until(
            lambda h: h.gocb_ref.endswith("tripack") and h.all_data[2] == 0x01, 2.0
        )
        self.pump_until(lambda h: h.gocb_ref.endswith("$pos") and self._pos(h) == "off", 2.0)
        return t1 - t0

    def close(self) -> None:
        run = self.procs[1] if len(self.procs) > 1 else None
        for p in self.procs:
            p.terminate()
        if run is not None:
            try:
                out, _ = run.communicate(timeout=5)
                self.controller_report = out.strip().splitlines()[-1] if out.strip() else ""
            except (subprocess.TimeoutExpired, ValueError):
                self.controller_report = ""
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        if getattr(self, "sock", None) is not None:
            self.sock.close()
        if getattr(self, "_affinity", None) is not None:
            os.sched_setaffinity(0, self._affinity)
        self.lab.close()


def load(iface: str, streams: int, fps: int, dst: str = "010ccd0100ff") -> int:
    """Unrelated GOOSE traffic: `streams` streams' retransmissions at `fps` in total, to
    `dst` (hex)."""
    sock = RawSocket(iface, timestamps=False)
    tpls = [
        FrameTemplate(
            GooseFrame(
                gocb_ref=f"LOAD{i:02d}LD0/LLN0$GO$g",
                dat_set=f"LOAD{i:02d}LD0/LLN0$ds",
                appid=(0x3000 + i) & 0xFFFF,
                dst=bytes.fromhex(dst),
                num_dat_set_entries=4,
            )
        )
        for i in range(streams)
    ]
    data = [
        t.encode_values((Boolean(True), Boolean(False), Boolean(True), Boolean(False)))
        for t in tpls
    ]
    t = UtcTime(1_700_000_000, 0, 0x0A)
    # paced by a sleep per millisecond, not a busy wait: a loader that spins takes a whole
    # core from the controller it is meant to load with frames (on 2 cores, half the box)
    tick_ns = 1_000_000
    per_tick = fps / 1000
    owed = 0.0
    nxt = time.monotonic_ns()
    sq, i = 1, 0
    print("loading", flush=True)
    while True:
        owed += per_tick
        while owed >= 1:
            sock.send(tpls[i].build(1, sq, 2000, t, data[i]))
            owed -= 1
            i += 1
            if i == len(tpls):
                i, sq = 0, sq + 1
        nxt += tick_ns
        delay = nxt - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        else:
            nxt = time.monotonic_ns()  # late (the box is busy): do not burst to catch up


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m goosectl.lab.wire_latency")
    sub = p.add_subparsers(dest="cmd", required=True)
    lo = sub.add_parser("load")
    lo.add_argument("--iface", required=True)
    lo.add_argument("--streams", type=int, default=50)
    lo.add_argument("--fps", type=int, default=5000)
    lo.add_argument("--dst", default="010ccd0100ff", help="destination MAC, hex")
    args = p.parse_args(argv)
    try:
        return load(args.iface, args.streams, args.fps, args.dst)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
