"""The agent's tools, run against the bay controller: device commands, waits, checks, notes.

`RunTool` effects come from the service; results go back to it as events. Tool results
are queued while the bay is busy and delivered by `pump`, so a result never re-enters the
controller in the middle of its own step. Device commands are at-most-once end to end:
the service checkpoints the command's sequence number (`tool_started`) before the shell
writes the bytes; a restarted controller reconciles an in-flight command from the device's
status (already in the commanded position: done). A close or an output not in effect is
never sent again (failed: `controller_restarted`); a harmless or safe-direction command
(a read, a trip) is asked again under the same sequence number, which the device answers
from its store if it had run it. A restored session's first command that would go out is
checked again: its step's age and, for a close, the bay's close guards.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, get_args

from pydantic import ValidationError

from goosectl.controller.agent.effects import CancelTool, RunTool
from goosectl.controller.agent.service import AgentService
from goosectl.controller.agent.tools import (
    Check,
    Delay,
    Device,
    Note,
    Publish,
    ToolArgs,
    ToolSet,
    WaitDevice,
    WaitGoose,
)
from goosectl.controller.goose.effects import FrameClassified
from goosectl.controller.link.core import WORKING
from goosectl.controller.link.effects import LinkEvent
from goosectl.controller.link.registry import RECONCILE, in_effect
from goosectl.controller.logic.actions import close_blockers
from goosectl.controller.logic.core import BayController
from goosectl.controller.logic.mapping import member_value
from goosectl.protocols.goose import Dbpos

#: trip/close finish when the breaker reaches this position (the device reports it)
END_POSITION = {"trip": "off", "close": "on"}
#: runs one tool: (runner, the RunTool, its checked arguments, now)
ToolFn = Callable[["ToolRunner", RunTool, Any, int], None]
#: device alarms under which no switching procedure should start (SF6 lockout, no trip coil)
NOT_READY_ALARMS = frozenset({"gas_pressure_low", "trip_circuit_fault"})


class Implementations:
    """Tool name -> the function that runs it, registered against the tool's argument
    model (`controller/agent/tools.py`): `fn(runner, run_tool, args, now_ns)`, which
    reports through `runner` (done, failed, or a wait that `pump` completes later)."""

    def __init__(self, fns: dict[str, ToolFn] | None = None) -> None:
        self.fns: dict[str, ToolFn] = dict(fns or {})

    def runs(self, model: type[ToolArgs]) -> Callable[[ToolFn], ToolFn]:
        if not model.tool_name:
            raise ValueError(f"{model.__name__} is not a declared tool (@ToolSet.tool)")

        def register(fn: ToolFn) -> ToolFn:
            self.fns[model.tool_name] = fn
            return fn

        return register

    def merged(self, *others: Implementations) -> Implementations:
        out = Implementations(self.fns)
        for other in others:
            out.fns.update(other.fns)
        return out

    def __contains__(self, tool: object) -> bool:
        return tool in self.fns

    def __getitem__(self, tool: str) -> ToolFn:
        return self.fns[tool]


RUNS = Implementations()


class ToolRunner:
    def __init__(
        self,
        service: AgentService,
        bay: BayController,
        runs: Implementations = RUNS,
        max_age_s: float = 30.0,
    ) -> None:
        """`runs` must implement every tool the service's procedures may name (its
        planner's tool set): a declared tool without code is refused here, at start,
        not when a session first reaches it."""
        self.service = service
        self.bay = bay
        self.tools: ToolSet = service.planner.tools
        missing = [t for t in self.tools if t not in runs]
        if missing:
            raise ValueError(
                f"agent tools declared without an implementation: {', '.join(missing)} "
                "(register one with @RUNS.runs(Model) in controller/agent/tool_runs.py)"
            )
        self.runs = runs
        self.commands: dict[int, tuple[RunTool, str, dict[str, Any]]] = {}
        self.waits: dict[str, tuple[RunTool, Any]] = {}
        self.reports: deque[Any] = deque()
        self.delays: dict[str, tuple[RunTool, int]] = {}
        self.log: list[str] = []
        #: restored sessions whose first device command after the restart is checked
        #: (`_resume_refusal`), and the age limit of that check
        self.resumed: set[str] = set()
        self.max_age_ns = int(max_age_s * 1e9)
        bay.observers.append(self.reports.append)

    # -- effects from the service ---------------------------------------------------------

    def execute(self, effects: list[Any], now_ns: int) -> None:
        for e in effects:
            if type(e) is RunTool:
                self._run(e, now_ns)
            elif type(e) is CancelTool:
                self._cancel(e)

    # -- what a tool's implementation reports through -----------------------------------

    def done(self, e: RunTool, now_ns: int, outcome: str = "ok", detail: str = "") -> None:
        """The tool finished with `outcome` (one its declaration lists)."""
        self.service.tool_done(e.session, e.step, e.attempt, now_ns, outcome, detail)

    def failed(self, e: RunTool, now_ns: int, error: str, final: bool = False) -> None:
        """The tool failed; the step's retry policy and fallback decide what follows
        (`final`: no retry, see `AgentService.tool_failed`)."""
        self.service.tool_failed(e.session, e.step, e.attempt, error, now_ns, final)

    def position(self) -> str | None:
        """The breaker position the device last reported (`on`, `off` ...), or None."""
        pos = self.bay.link.view.get("position")
        return None if pos is None else Dbpos(pos).name.lower()

    def _run(self, e: RunTool, now_ns: int) -> None:
        """Check the step's arguments against its tool's model (a restored session's may
        come from an older procedure text) and hand them to the tool's implementation."""
        if e.tool not in self.tools:
            self.failed(e, now_ns, f"unknown tool {e.tool!r}")
            return
        try:
            args = self.tools.parse(e.tool, e.args)
        except ValidationError as exc:
            why = "; ".join(f"{_loc(x['loc'])}{x['msg']}" for x in exc.errors())
            self.failed(e, now_ns, f"bad arguments for {e.tool}: {why}")
            return
        self.runs[e.tool](self, e, args, now_ns)

    def _in_effect(self, command: str, args: dict[str, Any]) -> bool:
        """Does the device already show what `command` would do? (reconciliation, by the
        same rule the link uses after a device reset)"""
        return in_effect(command, args.items(), self.bay.link.view)

    def send(self, e: RunTool, command: str, args: dict[str, Any], now_ns: int) -> None:
        """Send a device command at most once: checkpointed (`tool_started`) before its
        bytes go out, reconciled from the device's status after a restart."""
        if self.bay.withholds(command, f"{e.session} {e.step}", now_ns):
            # the controller's mode (test-blocked, off) keeps every command from the device
            self.failed(e, now_ns, f"{command} withheld: mode {self.bay.mode_name}")
            return
        if e.reconcile and self._in_effect(command, args):
            # the command we had sent before the restart did run: settle it, send nothing
            self.log.append(f"{e.session}: reconciled {command} seq {e.seq}: already done")
            self.done(e, now_ns, "ok", "reconciled: already done")
            return
        if e.reconcile and RECONCILE[command] == "fail":
            self._settle_unseen(e, command, now_ns)
            return
        if e.session in self.resumed:
            # the first command a restored session would send: is it still what was meant?
            self.resumed.discard(e.session)
            why = self._resume_refusal(e, command, now_ns)
            if why is not None:
                self.log.append(f"{e.session}: {command} refused after the restart: {why}")
                self.failed(e, now_ns, f"{command}: controller_restarted: {why}", final=True)
                return
        try:
            seq = self.bay.link.send_command(
                command, now_ns, seq=e.seq if e.reconcile else None, **args
            )
        except ValueError as exc:
            self.failed(e, now_ns, str(exc))
            return
        if e.reconcile:
            self.log.append(f"{e.session}: re-sent {command} under seq {seq}")
        self.commands[seq] = (e, command, args)
        self.service.tool_started(e.session, e.step, e.attempt, seq, now_ns)

    def _settle_unseen(self, e: RunTool, command: str, now_ns: int) -> None:
        """A close or an output whose answer was never seen before the restart, and that the
        device does not show: never sent again (it would run late, maybe against an
        interlock that blocks it now). Still moving: its end position settles it.
        Otherwise it failed, finally, and the session is told (RECONCILE: `fail`)."""
        if self.position() == "intermediate" and command in END_POSITION:
            self.waits[e.session] = (e, ("position", END_POSITION[command]))
            return
        self.resumed.discard(e.session)
        why = (
            f"{command} seq {e.seq} was in flight when the controller stopped and the device "
            f"does not show it (position {self.position()}): not sent again"
        )
        self.log.append(f"{e.session}: {why}")
        self.failed(e, now_ns, f"{command}: controller_restarted: {why}", final=True)

    def _resume_refusal(self, e: RunTool, command: str, now_ns: int) -> str | None:
        """Why a restored session's first command must not go out now, or None: its step
        is older than the age limit (or of unknown age: another boot of the host), or
        the guards the bay applies to a close refuse it now (interlocks, spring, alarms)."""
        since = self.service.loop(e.session).ctx.get("step_ns")
        limit = self.max_age_ns / 1e9
        if since is None or now_ns < since:
            return f"step {e.step} is of unknown age (agent.resume_max_age_s {limit:g} s)"
        if now_ns - since > self.max_age_ns:
            age = (now_ns - since) / 1e9
            return f"step {e.step} is {age:.1f} s old (agent.resume_max_age_s {limit:g} s)"
        if command == "close":
            blockers = close_blockers(self.bay.bay.ctx)
            if blockers:
                return f"close not permitted now: {'; '.join(blockers)}"
        return None

    def _cancel(self, c: CancelTool) -> None:
        self.waits.pop(c.session, None)
        self.delays.pop(c.session, None)
        for seq, (e, command, _) in list(self.commands.items()):
            if e.session == c.session:
                # a breaker operation cannot be stopped once the coil is energised; the
                # command's result is ignored from here on and the cancel is logged
                del self.commands[seq]
                self.log.append(f"{c.session}: cancelled {command} seq {seq} ({c.reason})")

    # -- results --------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return min((t for _, t in self.delays.values()), default=None)

    def pump(self, now_ns: int) -> None:
        """Turn what the controller reported into tool results (outside its steps)."""
        for sid, (e, t) in list(self.delays.items()):
            if t <= now_ns:
                del self.delays[sid]
                self.done(e, now_ns, "ok", "delay elapsed")
        while self.reports:
            r = self.reports.popleft()
            if type(r) is LinkEvent:
                self._link_event(r, now_ns)
                if r.kind == "position_changed":
                    self._wake(now_ns, ("position", r.get("position").lower()))
            elif type(r) is FrameClassified and r.deliver:
                self._wake(now_ns, ("goose", r))

    def _link_event(self, le: LinkEvent, now_ns: int) -> None:
        seq = le.seq
        entry = self.commands.get(seq) if seq is not None else None
        if entry is None or seq is None:
            return
        e, command, args = entry
        end = END_POSITION.get(command)
        if le.kind == "cmd_ok":
            result = le.get("result")
            if end is None or result in ("no_change", "done"):
                del self.commands[seq]
                self.done(e, now_ns, "ok", f"{command} {result}")
        elif le.kind == "operation_complete":
            del self.commands[seq]
            self.done(e, now_ns, "ok", f"{command} complete")
        elif le.kind in ("cmd_failed", "operation_failed"):
            del self.commands[seq]
            if le.reason == "stale_sequence" and e.reconcile:
                self._settle_stale(e, command, args, now_ns)
            else:
                self.failed(e, now_ns, f"{command}: {le.reason}")

    def _settle_stale(self, e: RunTool, command: str, args: dict[str, Any], now_ns: int):
        """The device no longer remembers the re-sent number: it either ran it long ago or
        never got it. Its state decides: in effect -> done; moving -> wait for the end
        position; otherwise it never ran -> send it once more, under a new number."""
        if self._in_effect(command, args):
            self.done(e, now_ns, "ok", "reconciled: already done")
        elif self.position() == "intermediate" and command in END_POSITION:
            self.waits[e.session] = (e, ("position", END_POSITION[command]))
        else:
            self.log.append(f"{e.session}: {command} seq {e.seq} never ran: sending it now")
            seq = self.bay.link.send_command(command, now_ns, **args)
            fresh = RunTool(e.session, e.step, e.attempt, e.tool, e.args)
            self.commands[seq] = (fresh, command, args)
            self.service.tool_started(e.session, e.step, e.attempt, seq, now_ns)

    def _wake(self, now_ns: int, what: tuple) -> None:
        for sid, (e, (kind, want)) in list(self.waits.items()):
            if kind != what[0]:
                continue
            if kind == "position" and want == what[1]:
                del self.waits[sid]
                self.done(e, now_ns, "ok", f"position {want}")
            elif kind == "goose":
                report: FrameClassified = what[1]
                # the stream's label and goCbRef (a procedure names it by either)
                names = self.bay._names_of(report.stream)
                if want.stream not in names:
                    continue
                value = member_value(report.values, want.member, [])
                if value == want.value:
                    del self.waits[sid]
                    self.done(e, now_ns, "ok", f"{want.stream} = {value}")


def _loc(loc: tuple) -> str:
    return f"{'.'.join(str(x) for x in loc)}: " if loc else ""


# -------------------------------------------------------------------------------- the tools
# one function per tool declared in controller/agent/tools.py, registered against its model


@RUNS.runs(Note)
def note(r: ToolRunner, e: RunTool, args: Note, now_ns: int) -> None:
    r.log.append(f"{e.session}: {args.text}")
    r.done(e, now_ns, "ok", args.text)


def _close_permitted(r: ToolRunner) -> list[str]:
    return close_blockers(r.bay.bay.ctx)


def _device_ready(r: ToolRunner) -> list[str]:
    why = []
    if r.bay.link.state not in WORKING:
        why.append(f"device link {r.bay.link.state}")
    why += [
        f"device alarm {n}"
        for n, on in sorted(r.bay.bay.ctx["device_alarms"].items())
        if on and n in NOT_READY_ALARMS
    ]
    return why


#: what `check` can ask: condition -> the reasons it is blocked now ([] = ok)
CONDITIONS: dict[str, Callable[[ToolRunner], list[str]]] = {
    "close_permitted": _close_permitted,
    "device_ready": _device_ready,
}
assert set(CONDITIONS) == set(get_args(Check.model_fields["condition"].annotation)), (
    "every condition Check declares needs its evaluation here, and no other"
)


@RUNS.runs(Check)
def check(r: ToolRunner, e: RunTool, args: Check, now_ns: int) -> None:
    why = CONDITIONS[args.condition](r)
    r.done(e, now_ns, *(("blocked", "; ".join(why)) if why else ("ok", args.condition)))


@RUNS.runs(Device)
def device(r: ToolRunner, e: RunTool, args: Device, now_ns: int) -> None:
    r.send(e, args.command, args.fields(), now_ns)


@RUNS.runs(WaitDevice)
def wait_device(r: ToolRunner, e: RunTool, args: WaitDevice, now_ns: int) -> None:
    if r.position() == args.position:
        r.done(e, now_ns, "ok", f"position {args.position}")
    else:
        r.waits[e.session] = (e, ("position", args.position))


@RUNS.runs(Delay)
def delay(r: ToolRunner, e: RunTool, args: Delay, now_ns: int) -> None:
    r.delays[e.session] = (e, now_ns + int(args.ms * 1_000_000))


@RUNS.runs(WaitGoose)
def wait_goose(r: ToolRunner, e: RunTool, args: WaitGoose, now_ns: int) -> None:
    r.waits[e.session] = (e, ("goose", args))


@RUNS.runs(Publish)
def publish(r: ToolRunner, e: RunTool, args: Publish, now_ns: int) -> None:
    r.bay.publish(args.topic, now_ns)
    r.done(e, now_ns, "ok", f"published {args.topic}")
