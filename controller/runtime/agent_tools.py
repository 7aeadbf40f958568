"""The agent's tools, run against the bay controller: device commands, waits, checks, notes.

`RunTool` effects come from the service; results go back to it as events. Tool results
are queued while the bay is busy and delivered by `pump`, so a result never re-enters the
controller in the middle of its own step. Device commands are at-most-once end to end:
the service checkpoints the command's sequence number (`tool_started`) before the shell
writes the bytes; a restarted controller reconciles an in-flight command from the device's
status (already in the commanded position: done) and, if it must ask again, under the same
sequence number, which the device answers from its store if it had run it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from controller.agent.effects import CancelTool, RunTool
from controller.agent.service import AgentService
from controller.goose.effects import FrameClassified
from controller.link.effects import LinkEvent
from controller.link.registry import in_effect
from controller.logic.actions import close_blockers
from controller.logic.core import BayController
from controller.logic.mapping import member_value
from protocols.goose import Dbpos

#: trip/close finish when the breaker reaches this position (the device reports it)
END_POSITION = {"trip": "off", "close": "on"}
#: device alarms under which no switching procedure should start (SF6 lockout, no trip coil)
NOT_READY_ALARMS = frozenset({"gas_pressure_low", "trip_circuit_fault"})


class ToolRunner:
    def __init__(self, service: AgentService, bay: BayController) -> None:
        self.service = service
        self.bay = bay
        self.commands: dict[int, tuple[RunTool, str, dict[str, Any]]] = {}
        self.waits: dict[str, tuple[RunTool, Any]] = {}
        self.reports: deque[Any] = deque()
        self.delays: dict[str, tuple[RunTool, int]] = {}
        self.log: list[str] = []
        bay.observers.append(self.reports.append)

    # -- effects from the service ---------------------------------------------------------

    def execute(self, effects: list[Any], now_ns: int) -> None:
        for e in effects:
            if type(e) is RunTool:
                self._run(e, now_ns)
            elif type(e) is CancelTool:
                self._cancel(e)

    def _done(self, e: RunTool, now_ns: int, outcome: str = "ok", detail: str = "") -> None:
        self.service.tool_done(e.session, e.step, e.attempt, now_ns, outcome, detail)

    def _failed(self, e: RunTool, now_ns: int, error: str) -> None:
        self.service.tool_failed(e.session, e.step, e.attempt, error, now_ns)

    def _position(self) -> str | None:
        pos = self.bay.link.view.get("position")
        return None if pos is None else Dbpos(pos).name.lower()

    def _run(self, e: RunTool, now_ns: int) -> None:
        tool, args = e.tool, dict(e.args or {})
        if tool == "note":
            self.log.append(f"{e.session}: {args.get('text', '')}")
            self._done(e, now_ns, "ok", args.get("text", ""))
        elif tool == "check":
            self._done(e, now_ns, *self._check(args.get("condition", "")))
        elif tool == "device":
            self._command(e, args, now_ns)
        elif tool == "wait_device":
            target = str(args["position"])
            if self._position() == target:
                self._done(e, now_ns, "ok", f"position {target}")
            else:
                self.waits[e.session] = (e, ("position", target))
        elif tool == "delay":
            self.delays[e.session] = (e, now_ns + int(float(args.get("ms", 0)) * 1_000_000))
        elif tool == "wait_goose":
            self.waits[e.session] = (e, ("goose", args))
        elif tool == "publish":
            self.bay.publish(args["topic"], now_ns)
            self._done(e, now_ns, "ok", f"published {args['topic']}")
        else:
            self._failed(e, now_ns, f"unknown tool {tool!r}")

    def _check(self, condition: str) -> tuple[str, str]:
        ctx = self.bay.bay.ctx
        if condition == "close_permitted":
            why = close_blockers(ctx)
        elif condition == "device_ready":
            why = []
            if self.bay.link.state not in ("up", "degraded"):
                why.append(f"device link {self.bay.link.state}")
            why += [
                f"device alarm {n}"
                for n, on in sorted(ctx["device_alarms"].items())
                if on and n in NOT_READY_ALARMS
            ]
        else:
            return "blocked", f"unknown condition {condition!r}"
        return ("blocked", "; ".join(why)) if why else ("ok", condition)

    def _in_effect(self, command: str, args: dict[str, Any]) -> bool:
        """Does the device already show what `command` would do? (reconciliation, by the
        same rule the link uses after a device reset)"""
        return in_effect(command, args.items(), self.bay.link.view)

    def _command(self, e: RunTool, args: dict[str, Any], now_ns: int) -> None:
        command = args.pop("command")
        if self.bay.withholds(command, f"{e.session} {e.step}", now_ns):
            # the controller's mode (test-blocked, off) keeps every command from the device
            self._failed(e, now_ns, f"{command} withheld: mode {self.bay.mode_name}")
            return
        if e.reconcile and self._in_effect(command, args):
            # the command we had sent before the restart did run: settle it, send nothing
            self.log.append(f"{e.session}: reconciled {command} seq {e.seq}: already done")
            self._done(e, now_ns, "ok", "reconciled: already done")
            return
        try:
            seq = self.bay.link.send_command(
                command, now_ns, seq=e.seq if e.reconcile else None, **args
            )
        except ValueError as exc:
            self._failed(e, now_ns, str(exc))
            return
        if e.reconcile:
            self.log.append(f"{e.session}: re-sent {command} under seq {seq}")
        self.commands[seq] = (e, command, args)
        self.service.tool_started(e.session, e.step, e.attempt, seq, now_ns)

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
                self._done(e, now_ns, "ok", "delay elapsed")
        while self.reports:
            r = self.reports.popleft()
            if type(r) is LinkEvent:
                self._link_event(r, now_ns)
                if r.kind == "position_changed":
                    self._wake(now_ns, ("position", r.get("position").lower()))
            elif type(r) is FrameClassified and r.deliver:
                self._wake(now_ns, ("goose", r))

    def _link_event(self, le: LinkEvent, now_ns: int) -> None:
        entry = self.commands.get(le.seq) if le.seq is not None else None
        if entry is None:
            return
        e, command, args = entry
        end = END_POSITION.get(command)
        if le.kind == "cmd_ok":
            result = le.get("result")
            if end is None or result in ("no_change", "done"):
                del self.commands[le.seq]
                self._done(e, now_ns, "ok", f"{command} {result}")
        elif le.kind == "operation_complete":
            del self.commands[le.seq]
            self._done(e, now_ns, "ok", f"{command} complete")
        elif le.kind in ("cmd_failed", "operation_failed"):
            del self.commands[le.seq]
            if le.reason == "stale_sequence" and e.reconcile:
                self._settle_stale(e, command, args, now_ns)
            else:
                self._failed(e, now_ns, f"{command}: {le.reason}")

    def _settle_stale(self, e: RunTool, command: str, args: dict[str, Any], now_ns: int):
        """The device no longer remembers the re-sent number: it either ran it long ago or
        never got it. Its state decides: in effect -> done; moving -> wait for the end
        position; otherwise it never ran -> send it once more, under a new number."""
        if self._in_effect(command, args):
            self._done(e, now_ns, "ok", "reconciled: already done")
        elif self._position() == "intermediate" and command in END_POSITION:
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
                self._done(e, now_ns, "ok", f"position {want}")
            elif kind == "goose":
                report: FrameClassified = what[1]
                names = self.bay.stream_names.get(report.stream, ())
                if want.get("stream") not in names:
                    continue
                value = member_value(report.values, int(want.get("member", 0)), [])
                if value == want.get("value", True):
                    del self.waits[sid]
                    self._done(e, now_ns, "ok", f"{want['stream']} = {value}")
