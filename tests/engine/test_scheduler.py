"""The one scheduler: its ordering rule, and its one runaway guard as each of
its users meets it: a pair of machines that answer each other forever ends in
`RunawayError` naming both, from the link, the simulated board, the bay, the agent and
the virtual wire, instead of hanging or overflowing the stack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.engine import Registry, RunawayError, Scheduler, Table
from goosectl.controller.engine.effects import Effect, Raise
from goosectl.controller.engine.spec import MachineSpec
from goosectl.controller.link import effects as link_effects
from goosectl.controller.link.core import LinkCore
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.effects import DeviceCommand, InputChanged
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.controller.shell.journal_store import open_journal
from goosectl.firmware_sim import effects as board_effects
from goosectl.firmware_sim.core import INJECTIONS, Firmware

REG = Registry("scheduler_test")


@dataclass(frozen=True, slots=True)
class Poke(Effect):
    target: str
    event: str


@dataclass(frozen=True, slots=True)
class Said(Effect):
    text: str


@REG.action(factory=True)
def poke(target: str, event: str):
    return lambda ctx, ev: Poke(target, event)


@dataclass(frozen=True, slots=True)
class LoudSaid(Said):
    pass


@REG.action(factory=True)
def say(text: str):
    return lambda ctx, ev: Said(text)


@REG.action(factory=True)
def shout(text: str):
    return lambda ctx, ev: LoudSaid(text)


@REG.action
def again(ctx, ev):
    return Raise("again")


@REG.action(factory=True)
def signal(target: str, event: str):
    """The device link's own effect between its two machines."""
    return lambda ctx, ev: link_effects.Signal(target, event)


@REG.action(factory=True)
def board_signal(target: str, event: str):
    """The simulated board's own effect between its machines."""
    return lambda ctx, ev: board_effects.Signal(target, event)


@REG.action
def ask_trip(ctx, ev):
    return DeviceCommand("trip", "loop")


@REG.action
def prot_rises(ctx, ev):
    return InputChanged("prot", "prot", "protection_trip", True, True, False, "", "")


def table(name: str, rows: list[dict[str, Any]], events: list[str], **extra: Any) -> Table:
    spec = {
        "name": name,
        "initial": "idle",
        "states": ["idle"],
        "events": events,
        "transitions": [{"source": "idle", "target": "idle", "internal": True, **r} for r in rows],
        **extra,
    }
    return Table.from_spec(MachineSpec.model_validate(spec), [REG])


def scheduler_with(*machines: tuple[str, Table], **kw: Any) -> tuple[Scheduler, list[str]]:
    said: list[str] = []
    s = Scheduler(
        handlers={
            Poke: lambda src, e, now: s.send(e.target, e.event, now),
            Said: lambda src, e, now: said.append(f"{src}:{e.text}"),
        },
        **kw,
    )
    for mid, t in machines:
        s.start(t.new(mid), 0)
    return s, said


def act(name: str, **args: str) -> dict[str, Any]:
    return {"name": name, "args": args}


# -- the ordering rule ----------------------------------------------------------------


def test_events_sent_by_handlers_wait_for_the_step_and_then_go_first_in_first_out():
    a = table(
        "a",
        [
            {
                "event": "go",
                "actions": [
                    act("poke", target="b", event="one"),
                    act("poke", target="c", event="two"),
                    act("say", text="a done"),
                ],
            }
        ],
        ["go"],
    )
    b = table("b", [{"event": "one", "actions": [act("say", text="b one")]}], ["one"])
    c = table("c", [{"event": "two", "actions": [act("say", text="c two")]}], ["two"])
    s, said = scheduler_with(("a", a), ("b", b), ("c", c))
    s.send("a", "go", 5)
    # a's whole step first (its own report included), then b, then c, in the order sent
    assert said == ["a:a done", "b:b one", "c:c two"]


def test_feed_fires_due_timers_first_and_journals_every_step_in_order(tmp_path):
    t = table(
        "t",
        [
            {"event": "arm", "actions": [act("say", text="armed")]},
            {"event": "ring", "actions": [act("say", text="rang")]},
            {"event": "ask", "actions": [act("say", text="asked")]},
        ],
        ["arm", "ring", "ask"],
        timers=[{"state": "idle", "after_ms": 2, "event": "ring"}],
    )
    j = open_journal(tmp_path / "j.sqlite")
    s, said = scheduler_with(("t", t), journal=j)
    s.feed("t", "ask", 3_000_000)  # the timer armed at start (due at 2 ms) fires first
    assert said == ["t:rang", "t:asked"]
    j.flush(3_000_000)
    assert [(r["event"], r["time_ns"]) for r in j.rows() if r["event"] != "__start__"] == [
        ("ring", 2_000_000),
        ("ask", 3_000_000),
    ]
    j.close()


def test_effects_go_to_the_handler_of_their_exact_type_or_to_the_default():
    t = table(
        "t", [{"event": "go", "actions": [act("shout", text="hi"), act("say", text="hi")]}], ["go"]
    )
    other: list[Any] = []
    s, said = scheduler_with(("t", t))
    s.route({}, default=lambda src, e, now: other.append(type(e).__name__))
    s.send("t", "go", 0)
    assert said == ["t:hi"]  # a subclass is not its base's: it goes to the default
    assert other == ["LoudSaid"]


# -- the guard, on the scheduler itself ---------------------------------------------------


def ping_pong(a: str = "ping", b: str = "pong") -> tuple[Table, Table]:
    """Two tables that answer each other for ever: a's `ball` pokes b, b's pokes a."""
    return (
        table(a, [{"event": "ball", "actions": [act("poke", target=b, event="ball")]}], ["ball"]),
        table(b, [{"event": "ball", "actions": [act("poke", target=a, event="ball")]}], ["ball"]),
    )


def assert_names_the_loop(err: RunawayError, *machines: str) -> None:
    assert set(err.machines) == set(machines)
    text = str(err)
    assert text.startswith("runaway: one input did not settle")
    for m in machines:
        assert m in text


def test_a_pair_that_ping_pongs_ends_in_one_error_naming_both_and_the_events():
    ping, pong = ping_pong()
    s, _ = scheduler_with(("ping", ping), ("pong", pong), limit=500)
    with pytest.raises(RunawayError) as exc:
        s.send("ping", "ball", 0)
    assert_names_the_loop(exc.value, "ping", "pong")
    assert "more than 500 steps" in str(exc.value)
    assert "ping:ball -> pong:ball -> ping:ball" in str(exc.value)
    # the scheduler is usable again: the next input starts its own count
    quiet = table("quiet", [{"event": "hi", "actions": [act("say", text="hello")]}], ["hi"])
    s.start(quiet.new("quiet"), 1)
    s.send("quiet", "hi", 1)


@REG.action
def fan_out(ctx, ev):
    return [Poke(f"m{i}", "x") for i in range(ev.payload)]


def test_the_limit_is_on_the_steps_of_one_input_and_each_input_counts_afresh():
    fan = table("fan", [{"event": "go", "actions": ["fan_out"]}], ["go"])
    many = table("many", [{"event": "x", "actions": [act("say", text="x")]}], ["x"])
    s, said = scheduler_with(("fan", fan), *((f"m{i}", many) for i in range(500)), limit=500)
    for _ in range(3):
        s.feed("fan", "go", 0, 499)  # 1 + 499 steps: at the limit, not past it
    assert len(said) == 3 * 499
    with pytest.raises(RunawayError) as exc:
        s.feed("fan", "go", 0, 500)
    assert "more than 500 steps" in str(exc.value)


def test_a_loop_that_recurses_is_stopped_by_its_depth_long_before_the_stack_overflows():
    ping, pong = ping_pong()
    s = Scheduler()
    # handlers that feed (dispatch at once, nested) instead of send: the stack grows
    s.route({Poke: lambda src, e, now: s.feed(e.target, e.event, now)})
    s.start(ping.new("ping"), 0)
    s.start(pong.new("pong"), 0)
    with pytest.raises(RunawayError) as exc:
        s.feed("ping", "ball", 0)
    assert_names_the_loop(exc.value, "ping", "pong")
    assert "nested" in str(exc.value)
    assert s.guard.depth == 0  # unwound


# -- the guard, from each user ------------------------------------------------------------


def test_the_device_link_bus():
    link = table(
        "link",
        [
            {"event": "opened", "actions": [act("signal", target="commands", event="ball")]},
            {"event": "ball", "actions": [act("signal", target="commands", event="ball")]},
        ],
        ["opened", "ball"],
    )
    commands = table(
        "commands",
        [{"event": "ball", "actions": [act("signal", target="link", event="ball")]}],
        ["ball"],
    )
    core = LinkCore()
    core.bus.guard.limit = 1000
    core.bus.start(link.new("link"), 0)  # the link's own names, on its bus
    core.bus.start(commands.new("commands"), 0)
    with pytest.raises(RunawayError) as exc:
        core.opened(1)
    assert_names_the_loop(exc.value, "link", "commands")


def test_the_simulated_board_bus():
    target, event = INJECTIONS["gas_low"]
    first = table(
        target,
        [
            {"event": event, "actions": [act("board_signal", target="spring", event="ball")]},
            {"event": "ball", "actions": [act("board_signal", target="spring", event="ball")]},
        ],
        sorted({event, "ball"}),
    )
    spring = table(
        "spring",
        [{"event": "ball", "actions": [act("board_signal", target=target, event="ball")]}],
        ["ball"],
    )
    fw = Firmware(now_ns=0)
    fw.bus.guard.limit = 1000
    fw.bus.start(first.new(target), 0)
    fw.bus.start(spring.new("spring"), 0)
    with pytest.raises(RunawayError) as exc:
        fw.inject("gas_low", True, 1)
    assert_names_the_loop(exc.value, target, "spring")


def test_the_bay_with_its_mode_machine():
    """The bay asks for a command, the mode (off: commands are withheld) withholds it and
    reports an input change that the bay acts on by asking again: the bay's own loop."""
    bay_t = table(
        "bay", [{"event": "protection_trip", "actions": ["ask_trip"]}], ["protection_trip"]
    )
    mode_t = Table.from_spec(
        MachineSpec.model_validate(
            {
                "name": "mode",
                "initial": "off",  # withholding: no command reaches the device
                "states": ["off"],
                "events": ["withhold"],
                "context": {"simulation": {"default": False}},
                "transitions": [
                    {
                        "source": "off",
                        "event": "withhold",
                        "target": "off",
                        "internal": True,
                        "actions": ["prot_rises"],
                    }
                ],
            }
        ),
        [REG],
    )
    bay = BayController(load_config(DEFAULT_CONFIG, ControllerConfig), 0)
    for mid, t in (("bay", bay_t), ("mode", mode_t)):
        bay.scheduler.forget(mid)
        m = t.new(mid)
        bay.scheduler.start(m, 0)
        setattr(bay, mid, m)
    with pytest.raises(RunawayError) as exc:
        bay.withholds("trip", "operator", 1)
    assert_names_the_loop(exc.value, "bay", "mode")
    # the same loop with the default limits: stopped by its depth, not Python's stack
    assert "nested" in str(exc.value)


def test_the_virtual_wire_between_two_endpoints_that_answer_every_byte():
    class Echo:
        def __init__(self) -> None:
            self.out = b""

        def receive(self, data: bytes, now_ns: int) -> None:
            self.out += data

        def advance(self, now_ns: int) -> None:
            pass

        def take_output(self) -> bytes:
            out, self.out = self.out, b""
            return out

        def next_deadline(self) -> int | None:
            return None

    class Controller(Echo):
        pass

    class Device(Echo):
        pass

    c = Controller()
    c.out = b"hello"
    wire = VirtualWire(c, Device())
    wire.guard.limit = 1000
    with pytest.raises(RunawayError) as exc:
        wire.run_for(1)
    assert_names_the_loop(exc.value, "Controller", "Device")
    assert "Controller:output -> Controller:receive" not in str(exc.value)  # a real exchange
    assert "Device:receive" in str(exc.value) and "Controller:receive" in str(exc.value)


def test_the_agent_with_a_procedure_whose_steps_hand_over_to_each_other(tmp_path):
    (tmp_path / "spin.yaml").write_text(
        "name: spin\n"
        "start: a\n"
        "steps:\n"
        "  a: {tool: note, args: {text: a}, next: b}\n"
        "  b: {tool: note, args: {text: b}, next: a}\n"
    )
    bay = BayController(load_config(DEFAULT_CONFIG, ControllerConfig), 0)
    service = AgentService(FolderPlanner(tmp_path))
    assert "spin" in service.planner.available(), service.planner.errors
    host = AgentBay(bay, service)
    faults: list[BaseException] = []
    host.on_fault = lambda _why, exc: faults.append(exc)
    # the runaway ends in the guard's error, which turns off the agent layer only
    host.handle({"op": "run", "procedure": "spin", "params": {}}, 1)
    assert len(faults) == 1 and isinstance(faults[0], RunawayError), faults
    assert {"s1", "s1/wf"} <= set(faults[0].machines)
    assert host.fault is not None and host.fault.startswith("RunawayError")


def test_a_machine_that_raises_events_at_itself_for_ever_ends_in_the_same_error():
    t = table("selfish", [{"event": "again", "actions": ["again"]}], ["again"])
    s, _ = scheduler_with(("selfish", t))
    with pytest.raises(RunawayError) as exc:
        s.feed("selfish", "again", 0)
    assert_names_the_loop(exc.value, "selfish")
    assert "raised more than 1000 events in one dispatch" in str(exc.value)
    assert s.machines["selfish"].transitions_total == 0  # nothing committed
