"""The bay controller with the agent layer attached: one endpoint for the shells.

`AgentBay` has the serial endpoint's shape (receive/advance/take_output/next_deadline and
the port callbacks), so `VirtualWire`, `VirtualPortPair` and `SerialLink` drive it like a
bare bay controller; after every input it lets the tools turn reports into results, the
service fire its timers, and the tools run what the service asked, until nothing moves.
The service checkpoints before `take_output` hands the bytes of a command to the port.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from typing import Any

from goosectl.controller.agent.effects import Respond, RunTool
from goosectl.controller.agent.service import AgentService
from goosectl.controller.agent.tool_runs import RUNS, Implementations, ToolRunner
from goosectl.controller.engine.effects import Notify
from goosectl.controller.link.core import WORKING
from goosectl.controller.logic.core import BayController


class AgentBay:
    def __init__(
        self,
        bay: BayController,
        service: AgentService,
        runs: Implementations = RUNS,
        *,
        resume_max_age_s: float = 30.0,
    ) -> None:
        """`runs`: the code of every tool the service's planner declares (a test or a
        site adds its own with `RUNS.merged(...)`). `resume_max_age_s`: a restored
        session's first device command is refused if its step began longer ago."""
        self.bay = bay
        self.service = service
        self.tools = ToolRunner(service, bay, runs, resume_max_age_s)
        self.now_ns = 0
        #: what the sessions did and told the operator (tools run, confirmations, answers)
        #: what the operator is told; `run` keeps only the last ones (a bounded deque)
        self.responses: list[Any] | deque[Any] = []
        #: tools of restored sessions: run once the device link is up (reconciling needs
        #: the device's status and its dedup memory)
        self.held: list[Any] = []
        #: told of every Notify the sessions emit (`run` counts expired confirmations)
        self.on_notify: Callable[[Notify, int], None] | None = None
        #: why the agent layer was turned off (an error inside it), or None
        self.fault: str | None = None
        #: told once when it is (`run` raises the `agent` alarm and logs the traceback)
        self.on_fault: Callable[[str, BaseException], None] | None = None

    def _disable(self, exc: BaseException) -> None:
        """An error inside the agent layer (a tool, the planner, a session, its journal)
        turns the agent layer off, once, and only it: the bay it wraps, GOOSE and the
        device link go on, because a supervisory procedure is never worth protection.
        Its sessions stay as journaled; a restarted controller resumes them."""
        if self.fault is None:
            self.fault = f"{type(exc).__name__}: {exc}"
            self.held.clear()
            # the bay stops feeding the tools' reports: nobody reads them any more
            with contextlib.suppress(ValueError):
                self.bay.observers.remove(self.tools.reports.append)
            self.tools.reports.clear()
            if self.on_fault is not None:
                self.on_fault(self.fault, exc)

    def restore(self, now_ns: int) -> int:
        try:
            n = self.service.restore(now_ns)
            self.held.extend(self.service.take())
            self.tools.resumed.update(self.service.open)
        except Exception as exc:  # isolation: see _disable
            self._disable(exc)
            return 0
        return n

    def round(self, now_ns: int) -> None:
        """Deliver tool results, fire agent timers, run requested tools, until quiet."""
        if self.fault is not None:
            return
        try:
            self._round(now_ns)
        except Exception as exc:  # isolation: see _disable
            self._disable(exc)

    def _round(self, now_ns: int) -> None:
        self.now_ns = max(self.now_ns, now_ns)
        if self.held and self.bay.link.state in WORKING:
            held, self.held = self.held, []
            self.tools.execute(held, now_ns)
        # one input for the sessions' scheduler: tools and sessions that keep answering
        # each other without time passing end in its guard's RunawayError
        guard = self.service.scheduler.guard
        guard.enter()
        try:
            while True:
                self.tools.pump(now_ns)
                self.service.advance(now_ns)
                out = self.service.take()
                if not out and not self.tools.reports:
                    return
                guard.step("tools", "round")
                self.tools.execute(out, now_ns)
                self.responses.extend(o for o in out if type(o) in (Respond, Notify, RunTool))
                if self.on_notify is not None:
                    for o in out:
                        if type(o) is Notify:
                            self.on_notify(o, now_ns)
        finally:
            guard.exit()

    # -- requests from the operator (control socket, demo) -----------------------------------

    def handle(self, request: dict[str, Any], now_ns: int) -> dict[str, Any]:
        """One control request: run, list, status, confirm, deny, abort, history, host."""
        if self.fault is not None:
            return {"ok": False, "error": self._disabled()}
        try:
            reply = self._handle(request, now_ns)
        except Exception as exc:  # isolation: see _disable
            self._disable(exc)
            return {"ok": False, "error": self._disabled()}
        self.round(now_ns)
        return reply

    def _disabled(self) -> str:
        return (
            f"the agent layer is off after an internal error ({self.fault}); GOOSE, the "
            "logic and the device link keep running; restart the controller to resume "
            "its sessions"
        )

    def _handle(self, request: dict[str, Any], now_ns: int) -> dict[str, Any]:
        op = request.get("op")
        s = self.service
        try:
            if op == "run":
                reply = s.request(str(request["procedure"]), _params(request), now_ns)
            elif op == "list":
                reply = {
                    "ok": True,
                    "sessions": s.status(),
                    "procedures": s.planner.available(),
                    "host": s.host_state(),
                }
            elif op == "status":
                sid = request.get("session")
                reply = {
                    "ok": True,
                    "status": s.status(sid) if sid else s.status(),
                    "host": s.host_state(),
                }
            elif op == "redirect":
                reply = s.redirect(
                    str(request["session"]),
                    str(request["procedure"]),
                    _params(request),
                    now_ns,
                )
            elif op in ("confirm", "deny", "abort"):
                sid = str(request["session"])
                step = request.get("step")
                now_at = s.status(sid)["step"] if step is not None and sid in s.sessions else step
                if step is not None and now_at != step:
                    # the asker saw another step (a page, a second click): nothing operates
                    reply = {"ok": False, "error": f"session {sid} is at step {now_at}, not {step}"}
                else:
                    reply = getattr(s, op)(sid, now_ns)
            elif op == "history":
                sid = str(request["session"])
                if not s.known(sid):
                    raise KeyError(f"no session {sid!r}")
                reply = {"ok": True, "history": s.history(sid)}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except KeyError as exc:
            why = str(exc.args[0]) if exc.args else "?"
            if " " not in why:  # a field the request lacks, not the service's reason
                why = f"bad request: {why!r} is missing"
            reply = {"ok": False, "error": why}
        except ValueError as exc:
            reply = {"ok": False, "error": f"bad request: {exc}"}
        return reply

    # -- the serial endpoint's shape --------------------------------------------------------

    def receive(self, data: bytes, now_ns: int) -> None:
        self.bay.receive(data, now_ns)
        self.round(now_ns)

    def advance(self, now_ns: int) -> None:
        self.bay.advance(now_ns)
        self.round(now_ns)

    def take_output(self) -> bytes:
        return self.bay.take_output()

    def next_deadline(self) -> int | None:
        agent = () if self.fault else (self.service.next_deadline(), self.tools.next_deadline())
        ds = [d for d in (self.bay.next_deadline(), *agent) if d]
        return min(ds) if ds else None

    def opened(self, now_ns: int) -> None:
        self.bay.opened(now_ns)
        self.round(now_ns)

    def closed(self, now_ns: int, reason: str | None = None) -> None:
        self.bay.closed(now_ns, reason)
        self.round(now_ns)

    @property
    def reopen_wanted(self) -> bool:
        return self.bay.reopen_wanted

    @reopen_wanted.setter
    def reopen_wanted(self, value: bool) -> None:
        self.bay.reopen_wanted = value

    def take_events(self) -> list:
        return []

    @property
    def state(self) -> str:
        return self.bay.state

    @property
    def view(self) -> dict[str, Any]:
        return self.bay.view


def _params(request: dict[str, Any]) -> dict[str, Any]:
    """A request's `params`: an object of plain values (a procedure binds and checks them)."""
    params = request.get("params") or {}
    if not isinstance(params, dict) or not all(
        isinstance(v, (str, int, float, bool)) for v in params.values()
    ):
        raise ValueError('"params" is an object of strings, numbers or booleans')
    return params
