"""The tool registry: procedures are checked against the tools' argument models on load
(file, line, step, field), and a new tool is declared and implemented without touching
the procedure loader, the session table or the tool runner."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from pydantic import Field

from goosectl.controller.agent.effects import RunTool
from goosectl.controller.agent.host import AgentBay
from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.procedure import ProcedureError, load_procedure, parse_procedure
from goosectl.controller.agent.service import AgentService
from goosectl.controller.agent.tool_runs import CONDITIONS, RUNS, Implementations
from goosectl.controller.agent.tools import TOOLS, Check, ToolArgs, ToolSet
from goosectl.controller.config.bay import DEFAULT_CONFIG, ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.logic.core import BayController
from goosectl.controller.shell.journal_store import open_journal

from .conftest import PROCEDURES, Rig

# the example: a wait_device step without `position`
NO_POSITION = """\
name: verify
start: verify
steps:
  verify:
    tool: wait_device
    args: {}
    next: done
  done: {tool: note, args: {text: verified}}
"""


def findings(text: str, tools: ToolSet = TOOLS, source: str = "p.yaml") -> list:
    with pytest.raises(ProcedureError) as exc:
        parse_procedure(text, source, tools=tools)
    return exc.value.findings


def test_a_step_missing_an_argument_is_rejected_on_load_with_file_line_step_and_field(tmp_path):
    p = tmp_path / "verify.yaml"
    p.write_text(NO_POSITION)
    with pytest.raises(ProcedureError) as exc:
        load_procedure(p)
    (f,) = exc.value.findings
    assert (f.code, f.item, f.line) == ("tool_args", "steps.verify.args.position", 6)
    assert str(f) == (
        f"{p}:6: [tool_args] steps.verify.args.position: Field required (tool wait_device)"
    )


def test_the_bad_file_is_rejected_alone_and_named_when_asked_for(rig, folder):
    (folder / "verify.yaml").write_text(NO_POSITION)
    r = rig.op(op="run", procedure="verify", params={})
    assert not r["ok"]
    assert "no procedure 'verify'" in r["error"]
    assert f"{folder / 'verify.yaml'}:6: [tool_args] steps.verify.args.position" in r["error"]
    assert rig.service.planner.rejections["tool_args"] == 1
    # the others stay in service
    assert rig.op(op="run", procedure="noop", params={"n": 1})["ok"]
    rig.run(200)
    assert rig.service.status("s1")["text"] == "done 1"
    # fixed: the next request picks it up (hot reload), and it runs
    (folder / "verify.yaml").write_text(NO_POSITION.replace("{}", '{position: "off"}'))
    assert rig.op(op="run", procedure="verify", params={})["ok"]
    rig.run(50)
    st = rig.service.status("s2")
    assert st["outcome"] == "done" and st["results"][0]["detail"] == "position off"


STEP = "name: p\nparams: {bay: {type: int}}\nstart: a\nsteps:\n  a: %s\n"


@pytest.mark.parametrize(
    ("step", "code", "item", "says"),
    [
        ("{tool: wait_device, args: {posiiton: 'on'}}", "tool_args", "steps.a.args.posiiton",
         "Extra inputs are not permitted (tool wait_device)"),
        ("{tool: wait_device, args: {position: on}}", "tool_args", "steps.a.args.position",
         "a YAML on/off/yes/no without quotes is a boolean: quote it"),
        ("{tool: check, args: {condition: close_ok}}", "tool_args", "steps.a.args.condition",
         "Input should be 'close_permitted' or 'device_ready'"),
        ("{tool: device, args: {command: set_output, mask: 1}}", "tool_args", "steps.a.args",
         "set_output takes mask, values: missing values (tool device)"),
        ("{tool: device, args: {command: open}}", "tool_args", "steps.a.args",
         "unknown command 'open'; known: ping, read_status, trip, close"),
        ("{tool: device, args: {command: set_output, mask: '1', values: 1}}", "tool_args",
         "steps.a.args", "set_output: mask must be integers"),
        ("{tool: delay}", "tool_args", "steps.a.args.ms", "Field required (tool delay)"),
        ("{tool: delay, args: {ms: -5}}", "tool_args", "steps.a.args.ms",
         "greater than or equal to 0"),
        ("{tool: teleport}", "unknown_tool", "steps.a.tool",
         "unknown tool 'teleport'; known: check, delay, device, note, publish, wait_device"),
        ("{tool: note, args: {text: 'bay {bya}'}}", "placeholder", "steps.a.args.text",
         "placeholder {bya} names no parameter (parameters: bay)"),
        ("{tool: note, args: {text: 'a { b'}}", "placeholder", "steps.a.args.text",
         "not a valid text template"),
    ],
)  # fmt: skip
def test_each_bad_argument_is_a_finding_naming_step_and_field(step, code, item, says):
    got = findings(STEP % step)
    assert all(f.line == 5 for f in got)
    (f,) = [f for f in got if f.item == item]
    assert f.code == code and says in f.reason


def test_every_bad_step_is_reported_at_once_with_the_workflow_findings():
    text = (
        "name: p\nstart: a\nsteps:\n"
        "  a: {tool: check, args: {condition: device_ready}, routes: {ok: b}}\n"
        "  b: {tool: wait_goose, args: {member: 1}, next: c}\n"
        "  c: {tool: publish, args: {topic: 7}}\n"
    )
    got = sorted((f.line, f.code, f.item) for f in findings(text))
    assert got == [
        (4, "router_outcomes", "a"),  # `blocked` has no route
        (5, "tool_args", "steps.b.args.stream"),
        (6, "tool_args", "steps.c.args.topic"),
    ]


def test_equipment_placeholders_must_name_parameters():
    text = "name: p\nparams: {bay: {type: int}}\nequipment: ['bay{bay}', 'x{n}']\n" + (
        "start: a\nsteps: {a: {tool: note}}\n"
    )
    (f,) = findings(text)
    assert (f.code, f.item, f.line) == ("placeholder", "equipment.1", 3)


def test_the_shipped_procedures_load():
    for path in sorted(PROCEDURES.glob("*.yaml")):
        assert load_procedure(path).name == path.stem


# ------------------------------------------------------------------ a new tool, one place

EXTRA = ToolSet("test")


@EXTRA.tool(outcomes=("match", "differ"))
class OutputsAre(ToolArgs):
    """Do the device's outputs under `mask` equal `values`?"""

    mask: int = Field(ge=1, le=255)
    values: int = Field(ge=0, le=255)


EXTRA_RUNS = Implementations()


@EXTRA_RUNS.runs(OutputsAre)
def outputs_are(r, e: RunTool, args: OutputsAre, now_ns: int) -> None:
    outputs = r.bay.link.view.get("outputs")
    if outputs is None:
        r.failed(e, now_ns, "the device has not reported its outputs")
    elif outputs & args.mask == args.values & args.mask:
        r.done(e, now_ns, "match", f"outputs {outputs:#04x}")
    else:
        r.done(e, now_ns, "differ", f"outputs {outputs:#04x}")


PROBE = """\
name: probe
start: probe
steps:
  probe:
    tool: outputs_are
    args: {mask: 1, values: 1}
    routes: {match: is_on, differ: is_off}
  is_on: {tool: note, args: {text: "output 1 on"}}
  is_off: {tool: note, args: {text: "output 1 off"}}
"""


def test_a_tool_declared_and_implemented_in_one_place_runs_in_a_procedure(folder):
    (folder / "probe.yaml").write_text(PROBE)
    rig = Rig(folder, tools=TOOLS.merged(EXTRA), runs=RUNS.merged(EXTRA_RUNS))
    assert rig.op(op="run", procedure="probe", params={})["ok"]
    rig.run(50)
    st = rig.service.status("s1")
    assert st["outcome"] == "done" and st["text"] == "output 1 off"
    assert st["results"][0]["outcome"] == "differ"
    rig.bay.link.send_command("set_output", rig.now, mask=1, values=1)
    rig.run(50)
    assert rig.op(op="run", procedure="probe", params={})["ok"]
    rig.run(50)
    assert rig.service.status("s2")["text"] == "output 1 on"
    # the built-in tools are still there, in the same set
    assert rig.op(op="run", procedure="noop", params={"n": 3})["ok"]


def test_the_new_tool_s_outcomes_and_arguments_are_checked_on_load():
    tools = TOOLS.merged(EXTRA)
    assert parse_procedure(PROBE, "probe.yaml", tools=tools).name == "probe"
    got = findings(PROBE.replace(", differ: is_off", ""), tools)
    (f,) = [f for f in got if f.code == "router_outcomes"]
    assert "missing from the route map: differ" in f.reason
    (f,) = findings(PROBE.replace("values: 1", "values: 256"), tools)
    assert (f.item, f.line) == ("steps.probe.args.values", 6)
    # without the registry entry the same file names an unknown tool
    (f,) = findings(PROBE)
    assert f.code == "unknown_tool" and "'outputs_are'" in f.reason


def test_a_declared_tool_without_an_implementation_is_refused_at_start(tmp_path: Path):
    cfg = load_config(DEFAULT_CONFIG, ControllerConfig)
    service = AgentService(FolderPlanner(tmp_path, tools=TOOLS.merged(EXTRA)))
    with pytest.raises(ValueError, match="without an implementation: outputs_are"):
        AgentBay(BayController(cfg, 0), service)


def test_arguments_checked_again_when_the_tool_runs(rig, folder):
    """A restored session's arguments come from the journal (perhaps an older text): bad
    ones fail the step with the reason, they never raise out of the scheduler."""
    (folder / "verify.yaml").write_text(NO_POSITION.replace("{}", '{position: "on"}'))
    assert rig.op(op="run", procedure="verify", params={})["ok"]
    rig.run(1)
    assert rig.state("s1") == "waiting_for_tool"
    rig.host.tools.execute([RunTool("s1", "verify", 1, "wait_device", {"pos": "on"})], rig.now)
    rig.run(1)
    st = rig.service.status("s1")
    assert st["outcome"] == "failed"
    assert st["results"][-1]["error"] == (
        "bad arguments for wait_device: position: Field required; "
        "pos: Extra inputs are not permitted"
    )


def test_every_condition_check_declares_has_an_evaluation():
    assert set(CONDITIONS) == set(get_args(Check.model_fields["condition"].annotation))


# an older, laxer wait_device (no `position` needed): what a journal written before the
# argument checks may hold
LAX = ToolSet("lax")


@LAX.tool(name="wait_device")
class LaxWait(ToolArgs):
    """wait_device as it was accepted before its arguments were checked."""

    position: str | None = None


OLD = """\
name: old
start: close
steps:
  close: {tool: device, args: {command: close}, confirm: true, next: verify}
  verify: {tool: wait_device, next: done, fallback: unverified}
  done: {tool: note, args: {text: closed}}
  unverified: {tool: note, args: {text: "close not verified"}, outcome: failed}
"""


def test_a_restored_session_whose_text_fails_today_s_checks_fails_that_step_only(folder, tmp_path):

    path = tmp_path / "agent.sqlite"
    (folder / "old.yaml").write_text(OLD)
    rig = Rig(folder, open_journal(path, durability="step"), tools=TOOLS.merged(LAX))
    assert rig.op(op="run", procedure="old", params={})["ok"]
    rig.run(10)
    assert rig.state("s1") == "awaiting_confirmation"
    # restarted with today's tools: the folder's copy is rejected, the journal's restored
    rig2 = Rig(folder, open_journal(path, durability="step"))
    assert "steps.verify.args.position" in rig2.service.planner.errors[str(folder / "old.yaml")]
    assert rig2.host.restore(rig2.now) == 1
    assert rig2.state("s1") == "awaiting_confirmation"
    assert rig2.op(op="confirm", session="s1")["ok"]
    rig2.run(300)
    st = rig2.service.status("s1")
    assert rig2.executed("CLOSE") == 1 and rig2.bay.bay.state == "closed"
    assert st["outcome"] == "failed" and st["text"] == "close not verified"
    assert st["results"][1]["error"] == "bad arguments for wait_device: position: Field required"


WAIT_CILO = """\
name: wait_permit
start: wait
steps:
  wait: {tool: wait_goose, args: {stream: bay2-cilo, value: true}, timeout_ms: 5000,
         next: done}
  done: {tool: note, args: {text: "bay 2 permits"}}
"""


def test_wait_goose_ends_when_the_stream_delivers_the_value(folder):
    """Real frames from bay 2's interlock publisher (goosectl's own) into the bay."""
    from goosectl.controller.config.goose import GooseConfig
    from goosectl.controller.demo.scenario import CILO, EPOCH, publishers_config
    from goosectl.controller.goose.effects import SendFrame
    from goosectl.controller.goose.hub import GooseHub
    from goosectl.controller.replay.virtual_wire import VirtualWire
    from goosectl.firmware_sim.core import Firmware
    from goosectl.protocols.goose import Boolean

    ms = 1_000_000
    (folder / "wait_permit.yaml").write_text(WAIT_CILO)
    bay = BayController(load_config(DEFAULT_CONFIG, ControllerConfig), EPOCH)
    service = AgentService(FolderPlanner(folder))
    host = AgentBay(bay, service)
    wire = VirtualWire(host, Firmware(now_ns=EPOCH), start_ns=EPOCH)
    ieds = GooseHub(GooseConfig(publishers=publishers_config().publishers))

    def deliver(effects) -> None:
        for e in effects:
            if type(e) is SendFrame:
                bay.frame(e.data, "A", wire.now_ns)
        host.round(wire.now_ns)

    bay.start(EPOCH)
    host.opened(EPOCH)
    wire.run_until(EPOCH + 100 * ms)
    deliver(ieds.start(wire.now_ns, wire.now_ns))

    def cilo(permit: bool) -> None:
        ieds.scheduler.feed(
            f"pub:{CILO}", "publish", wire.now_ns, ((Boolean(permit),), wire.now_ns)
        )
        deliver(ieds.drain())
        wire.run_until(wire.now_ns + 10 * ms)

    cilo(False)
    assert host.handle({"op": "run", "procedure": "wait_permit"}, wire.now_ns)["ok"]
    cilo(False)  # a delivered frame with another value: still waiting
    assert service.status("s1")["state"] == "waiting_for_tool"
    cilo(True)
    st = service.status("s1")
    assert st["outcome"] == "done" and st["results"][0]["detail"] == "bay2-cilo = True"
