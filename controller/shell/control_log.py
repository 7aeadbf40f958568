"""Who asked what over the control socket, and every limit the shell enforced.

Both go through the engine and into the controller's journal: a `control` machine takes one
transition per request (its row's detail names the peer's uid, gid and pid, the op and the
outcome), and each limit is a `limit` machine (tables/limit.yaml): crossing it counts,
raises the alarm, and journals the first crossing and the all-clear. The alarm is what the
status line shows (`alarms[limit:control.clients]`); a raise is also a WARNING event of
`controller.shell` (``goosectl: limit control.clients: ...``), the all-clear an INFO one.

Reads (`READS`: a status, a listing) are the exception: of the answered reads of one
connection only the first is journaled (who looked), the rest are counted
(`requests.read_unjournaled`), so a client that polls on one connection, like the fleet
uplink once a second, does not turn the audit trail into a poll log. Refusals, changes and
requests relayed for a remote identity (`via`) are always journaled.

The journal rows carry their detail as text (the journal stores a text `effects` as it is),
recorded here from each step rather than by the scheduler, which would digest the effects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from goosectl.controller import logs
from goosectl.controller.engine import Journal, Scheduler, Table
from goosectl.controller.engine.machine import Machine, Step
from goosectl.controller.engine.resources import shipped

log = logging.getLogger(__package__)
TABLES = shipped("goosectl.controller.shell", "tables")
#: Requests that only read: `mode` without a mode or simulation to set is one too.
READS = frozenset({"controller", "list", "status", "history"})
#: What the shell is told when a limit's alarm changes: (limit, active, detail).
AlarmSink = Callable[[str, bool, str], None]


def only_reads(req: Any, op: str | None, reply: dict[str, Any]) -> bool:
    """An answered request that read and changed nothing, and carries no remote identity
    (a relayed request is always journaled: the identity it names is the audit)."""
    if not reply.get("ok") or not isinstance(req, dict) or req.get("via") is not None:
        return False
    if op == "mode":
        return req.get("mode") is None and req.get("simulation") is None
    return op in READS


class ControlLog:
    def __init__(
        self,
        journal: Journal | None,
        now_ns: int,
        *,
        quiet_s: float = 10.0,
        on_alarm: AlarmSink | None = None,
    ) -> None:
        self.journal = journal
        self.quiet_ms = quiet_s * 1000
        self.on_alarm = on_alarm
        self.limit_table = Table.load(TABLES / "limit.yaml")
        self.scheduler = Scheduler(None)
        self.scheduler.on_step = self._record
        self._detail = ""
        #: the step being fed is counted, not journaled (a connection's later read)
        self._quiet = False
        #: answered reads counted and not journaled
        self.reads_unjournaled = 0
        self.scheduler.start(Table.load(TABLES / "control.yaml").new("control"), now_ns)

    # -- inputs -------------------------------------------------------------------------

    def request(
        self,
        peer: Any,
        op: Any,
        reply: dict[str, Any],
        now_ns: int,
        via: Any = None,
        *,
        journaled: bool = True,
    ) -> None:
        """One request answered (`ok`) or refused, with who sent it; `via`: the remote
        identity a relay (the fleet uplink) says it carries the request for. `journaled`
        False: a read the connection already had journaled once, counted only."""
        ok = bool(reply.get("ok"))
        what = f"op={op!r}" if op is not None else "unparsed"
        outcome = "ok" if ok else f"refused: {reply.get('error', '')}"
        session = reply.get("session")
        relay = f" via={str(via)[:300]!r}" if via is not None else ""
        self._detail = f"{peer}{relay} {what}{f' session={session}' if session else ''} {outcome}"[
            :800
        ]
        self._quiet = ok and not journaled
        try:
            self.scheduler.feed("control", "answered" if ok else "refused", now_ns)
        finally:
            self._quiet = False

    def crossed(
        self, limit: str, detail: str, now_ns: int, fields: Mapping[str, Any] | None = None
    ) -> None:
        """A limit was crossed (a client refused or dropped, a request refused or deferred,
        frames dropped); `fields`: what the raise's log event carries besides the detail."""
        mid = f"limit:{limit}"
        m = self.scheduler.machines.get(mid)
        if m is None:
            m = self.limit_table.new(mid, quiet_ms=self.quiet_ms)
            self._detail = ""
            self.scheduler.start(m, now_ns)
        raised = m.state == "ok"
        self._detail = detail[:500]
        self.scheduler.feed(mid, "crossed", now_ns, self._detail)
        if raised:
            logs.event(
                log, logging.WARNING, "limit", "limit %s: %s", limit, detail,
                limit=limit, active=True, detail=detail, **(fields or {}),
            )  # fmt: skip
            if self.on_alarm is not None:
                self.on_alarm(limit, True, detail)

    def advance(self, now_ns: int) -> None:
        """Fire due quiet timers: alarms clear."""
        for m, step in self.scheduler.advance(now_ns):
            if step.transitions and m.state == "ok":
                limit, count = m.id.removeprefix("limit:"), m.ctx["count"]
                logs.event(
                    log, logging.INFO, "limit", "limit %s: clear (%d crossings in total)",
                    limit, count, limit=limit, active=False, count=count,
                )  # fmt: skip
                if self.on_alarm is not None:
                    self.on_alarm(limit, False, "")

    # -- views --------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Crossings per limit, and the requests answered (reads among them), refused, and
        the answered reads not journaled."""
        out = {
            mid.removeprefix("limit:"): m.ctx["count"]
            for mid, m in self.scheduler.machines.items()
            if mid != "control"
        }
        ctl = self.scheduler.machines["control"].ctx
        return {
            "requests.answered": ctl["answered"],
            "requests.refused": ctl["refused"],
            "requests.read_unjournaled": self.reads_unjournaled,
            **out,
        }

    def active(self) -> dict[str, str]:
        """Limits whose alarm is up, with the last crossing's detail."""
        return {
            mid.removeprefix("limit:"): m.ctx["detail"]
            for mid, m in self.scheduler.machines.items()
            if m.state == "exceeded"
        }

    # -- the journal --------------------------------------------------------------------

    def _record(self, machine: Machine, step: Step, now_ns: int) -> None:
        if self.journal is None:
            return
        if step.transitions == [("exceeded", "crossed", "exceeded")]:
            return  # counted, not journaled (see tables/limit.yaml)
        if self._quiet and machine.id == "control":
            self.reads_unjournaled += 1
            return  # counted (`answered`), not journaled: a connection's later read
        detail = self._detail
        if step.transitions and step.transitions[-1][1] == "quiet":
            detail = f"clear: {machine.ctx['count']} crossings in total"
        row = Step(step.state)
        row.transitions = step.transitions
        # a journal row's effects slot holds text for rows like this one (stored as it is)
        row.effects = detail or "-"  # type: ignore[assignment]
        self.journal.record(machine, row, now_ns)
