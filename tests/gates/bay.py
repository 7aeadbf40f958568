"""A bay controller with the demo's substation around it, on one virtual clock: the
protection IED, bay 2 and SCADA are goosectl's own publishers (scenario.publishers_config),
the breaker is the firmware simulator on an in-memory wire."""

from __future__ import annotations

import copy
import functools
import time
from typing import Any

import yaml

from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.demo.scenario import CILO, EPOCH, SCADA, publishers_config
from goosectl.controller.engine import Journal
from goosectl.controller.goose.effects import SendFrame
from goosectl.controller.goose.hub import GooseHub
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.effects import CommandWithheld, DeviceCommand, InputChanged
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.goose import Boolean, Quality, decode_frame

MS = 1_000_000
S = 1000 * MS
GOOD = Quality()


def config(**changes: Any) -> ControllerConfig:
    """The packaged bay config with `changes` applied: `inputs` (index -> dict merged into
    that input) and `logic` (dict merged)."""
    data = copy.deepcopy(_packaged())
    for i, upd in changes.get("inputs", {}).items():
        data["inputs"][i].update(upd)
    data["logic"].update(changes.get("logic", {}))
    return ControllerConfig.model_validate(data)


@functools.cache
def _packaged() -> dict[str, Any]:
    """The packaged config as parsed YAML, read once (each `config` edits a copy)."""
    return yaml.safe_load(DEFAULT_CONFIG.read_text())


def trip_signed(keys: Any, **prot: Any) -> dict[str, Any]:
    """The packaged bay config as YAML data with the protection trip subscribed
    `auth: required` (and `prot`'s changes to that subscription) and the key file
    `keys` named: the controller of the live IEC 62351-6 tests."""
    data = copy.deepcopy(_packaged())
    for sub in data["goose"]["subscriptions"]:
        if sub["name"] == "prot":
            sub["auth"] = "required"
            sub.update(prot)
    data["goose"]["keys"] = str(keys)
    return data


def ready_for_scada(bay) -> bool:
    """The bay knows its breaker is open and holds a valid value of SCADA's stream: a
    close request from SCADA now is one the logic acts on."""
    return bay.bay.state == "open" and bay.input_machines["scada"].state == "valid"


def sayer(peer: Any, then_s: float = 0.4) -> Any:
    """`say(line)` for a test peer that answers each command line with `ok`: send it,
    read the answer, give the controller `then_s` to act on it."""

    def say(line: str) -> None:
        peer.stdin.write(line + "\n")
        peer.stdin.flush()
        assert peer.stdout.readline().strip() == "ok", peer.stderr.read()
        time.sleep(then_s)

    return say


def wait_until(what: str, cond: Any, show: Any = lambda: "", timeout: float = 10.0) -> None:
    """Until `cond()` holds (the controller's loop runs in its own thread); the deadline
    only bounds a failing test."""
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, f"the controller did not {what}: {show()}"
        time.sleep(0.01)


class Bay:
    def __init__(self, cfg: ControllerConfig | None = None, journal: Journal | None = None):
        self.bay = BayController(cfg or config(), EPOCH, journal)
        self.fw = Firmware(now_ns=EPOCH)
        self.wire = VirtualWire(self.bay, self.fw, start_ns=EPOCH)
        pubs = [p for p in publishers_config().publishers if p.name != "prot-B"]
        self.ieds = GooseHub(GooseConfig(publishers=pubs))
        self.reports: list[Any] = []
        self.sent: list[SendFrame] = []
        self.bay.start(EPOCH)
        self.bay.opened(EPOCH)
        self.wire.run_until(EPOCH + 100 * MS)
        self._deliver(self.ieds.start(self.now, self.now))
        self.run(100)

    @property
    def now(self) -> int:
        return self.wire.now_ns

    def _deliver(self, effects) -> None:
        for e in effects:
            if type(e) is SendFrame:
                self.bay.frame(e.data, "A", self.now)
        self._take()

    def _take(self) -> None:
        self.reports += self.bay.take_reports()
        self.sent += self.bay.take_frames()

    def run(self, ms: float) -> None:
        """Virtual time passes: heartbeats arrive, timers fire, the breaker moves."""
        end = self.now + int(ms * MS)
        while (d := self.ieds.next_deadline()) is not None and d <= end:
            self.wire.run_until(d)
            self._deliver(self.ieds.advance(d))
        self.wire.run_until(end)
        self._take()

    def publish(self, name: str, *values) -> None:
        self.ieds.scheduler.feed(f"pub:{name}", "publish", self.now, (tuple(values), self.now))
        self._deliver(self.ieds.drain())

    def trip(self, value: bool, q: Quality = GOOD) -> None:
        self.publish("prot-A", Boolean(value), q.to_bitstring())

    def cilo(self, permit: bool) -> None:
        self.publish(CILO, Boolean(permit))

    def close(self) -> None:
        """A SCADA close request (rising edge), then the request back to false."""
        self.publish(SCADA, Boolean(True))
        self.run(50)
        self.publish(SCADA, Boolean(False))

    def set_mode(self, mode: str) -> None:
        self.bay.set_mode(mode, self.now, "test")
        self._take()

    # -- what happened ---------------------------------------------------------------------

    def commands(self, command: str | None = None) -> list[str]:
        """Commands that went to the device (not the withheld ones)."""
        return [
            r.command
            for r in self.reports
            if type(r) is DeviceCommand and (command is None or r.command == command)
        ]

    def withheld(self) -> list[CommandWithheld]:
        return [r for r in self.reports if type(r) is CommandWithheld]

    def input_changes(self, name: str) -> list[InputChanged]:
        return [r for r in self.reports if type(r) is InputChanged and r.input == name]

    def published(self, gocb_suffix: str) -> list:
        """Decoded new states (sqNum 0) the controller published for a data set."""
        out = []
        for f in self.sent:
            fr = decode_frame(f.data)
            if fr.gocb_ref.endswith(gocb_suffix) and fr.sq_num == 0:
                out.append(fr)
        return out

    @property
    def state(self) -> str:
        return self.bay.bay.state
