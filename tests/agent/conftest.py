"""The agent on the virtual clock: bay controller + firmware + service + tools."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.agent.tool_runs import RUNS, Implementations
from goosectl.controller.agent.tools import TOOLS, ToolSet
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.engine import Journal
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.firmware_sim.core import Firmware

MS = 1_000_000
PROCEDURES = Path(__file__).resolve().parents[2] / "controller" / "agent" / "procedures"

NOOP = """
name: noop
params: {n: {type: int}}
equipment: ["unit{n}"]
start: first
steps:
  first: {tool: note, args: {text: "start {n}"}, next: wait}
  wait: {tool: wait_device, args: {position: "off"}, timeout_ms: 50, next: done}
  done: {tool: note, args: {text: "done {n}"}}
"""


class Rig:
    def __init__(
        self,
        folder: Path,
        journal: Journal | None = None,
        tools: ToolSet = TOOLS,
        runs: Implementations = RUNS,
    ) -> None:
        cfg = load_config(DEFAULT_CONFIG, ControllerConfig)
        # no GOOSE here: without bay 2's interlock input the close is not interlocked
        # (with it, its fail-safe value blocks every close: `interlock bay2 no data`)
        cfg = cfg.model_copy(update={"inputs": [i for i in cfg.inputs if i.event != "interlock"]})
        self.bay = BayController(cfg, 0)
        self.fw = Firmware(now_ns=0)
        self.service = AgentService(FolderPlanner(folder, tools=tools), journal)
        self.host = AgentBay(self.bay, self.service, runs)
        self.wire = VirtualWire(self.host, self.fw)
        self.bay.start(0)
        self.host.opened(0)
        self.run(100)
        self.folder = folder

    @property
    def now(self) -> int:
        return self.wire.now_ns

    def run(self, ms: float) -> None:
        self.wire.run_until(self.wire.now_ns + int(ms * MS))

    def close_breaker(self) -> None:
        """Close the breaker (the device starts open) and wait out the anti-pump window."""
        self.bay.close_request(self.now)
        self.run(600)
        assert self.bay.bay.state == "closed"

    def op(self, **req):
        return self.host.handle(req, self.now)

    def state(self, sid: str) -> str:
        return self.service.status(sid)["state"]

    def step(self, sid: str) -> str:
        return self.service.status(sid)["step"]

    def executed(self, msg: str) -> int:
        return self.fw.stats.executed.get(msg, 0)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "procedures"
    shutil.copytree(PROCEDURES, d)
    (d / "noop.yaml").write_text(NOOP)
    return d


@pytest.fixture
def rig(folder: Path) -> Rig:
    return Rig(folder)
