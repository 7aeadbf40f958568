"""A replay gives the same journal, and the same frames out, with the reflex as without.

The demo's scenario (three protection trips, re-closes, an interlock, device faults) is
replayed twice on the virtual clock with the device simulator: once through the engine
alone, once with the live shell's reflex in front of it (`LiveReflex`: fire before the
engine, the engine's same TRIP and ack taken out of its outputs, re-armed after every
input, as `BayLive` does). The reflex writes no journal rows, only meta entries, so the
rows must be the same, byte for byte, and so must the output capture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.demo.scenario import build
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.bay_replay import BayReplay
from goosectl.controller.shell.journal_store import open_journal
from goosectl.controller.shell.reflex_live import LiveReflex
from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.goose import Vlan

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "controller" / "bay1.yaml"


class ReflexBay(BayController):
    """The bay with the live shell's reflex around its inputs: what the reflex writes and
    sends joins the engine's outputs first, where the live shell writes and sends it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.port = bytearray()
        self.early: list[SendFrame] = []
        self.reflex = LiveReflex(self, self.port.extend, self._send)
        self.urgent = self.reflex.urgent

    def _send(self, frames: list[SendFrame]) -> list[SendFrame]:
        self.early += frames
        return frames

    def frame(self, buf: bytes, side: str, now_ns: int, vlan: Vlan | None = None) -> None:
        self.reflex.before(buf, side, now_ns, vlan)
        super().frame(buf, side, now_ns, vlan)
        self.reports += [e for e in self.reflex.after(now_ns) if type(e) is not SendFrame]
        self.reflex.rearm()

    def advance(self, now_ns: int) -> None:
        super().advance(now_ns)
        self.reflex.rearm()

    def receive(self, data: bytes, now_ns: int) -> None:
        super().receive(data, now_ns)
        self.reflex.rearm()

    def take_output(self) -> bytes:
        out = bytes(self.port) + super().take_output()
        self.port.clear()
        return out

    def take_frames(self) -> list[SendFrame]:
        out, self.early = self.early + super().take_frames(), []
        return out


def replay(tmp_path: Path, name: str, cls: type[BayController]):
    cfg = load_config(CONFIG, ControllerConfig)
    scn = build()
    t0 = scn.frames[0][0]
    journal = open_journal(tmp_path / f"{name}.sqlite", durability="group")
    bay = cls(cfg, t0, journal)
    run = BayReplay(bay, Firmware(now_ns=t0), tmp_path / f"{name}.pcap")
    run.run(scn.frames, run.inject(scn.faults), scn.end_ns)
    run.close()
    return bay, [tuple(r.values()) for r in journal.rows()], (tmp_path / f"{name}.pcap")


def test_a_replay_journals_the_same_with_the_reflex(tmp_path):
    _, plain, plain_pcap = replay(tmp_path, "engine", BayController)
    bay, reflexed, reflex_pcap = replay(tmp_path, "reflex", ReflexBay)
    assert isinstance(bay, ReflexBay)
    assert bay.reflex.fired >= 1, "the scenario's trips never fired the reflex"
    assert bay.reflex.disagreed == 0
    assert len(plain) > 100
    assert reflexed == plain
    assert reflex_pcap.read_bytes() == plain_pcap.read_bytes()
