"""What a person reads after a run: a timeline, the anomalies, latency percentiles, and
the LGOS view of every subscription (what the receive rules refused, and why).

Shared by `goosectl demo`, `goosectl replay --device sim` and `goosectl bench`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from goosectl.controller.agent.effects import Respond, RunTool
from goosectl.controller.display import printable
from goosectl.controller.engine.effects import Alarm, Notify
from goosectl.controller.goose.auth import REASONS as AUTH_REASONS
from goosectl.controller.goose.effects import (
    FrameClassified,
    LgosView,
    PublisherSides,
    RxDrops,
    StreamState,
)
from goosectl.controller.goose.gate import ERR_TEXT
from goosectl.controller.link.effects import LinkEvent
from goosectl.controller.logic.core import BayStep
from goosectl.controller.logic.effects import (
    CommandWithheld,
    DeviceCommand,
    InputChanged,
    ModeChanged,
    PublishTopic,
)
from goosectl.controller.report.anomalies import NORMAL_CLASSES


def _refusal_text(code: str) -> str:
    """What a refusal code means: a receive rule's (gate.ERR_TEXT) or authentication's."""
    if code.startswith("auth_"):
        return AUTH_REASONS.get(code[5:], code)
    return ERR_TEXT.get(code, code)


#: classes of a frame the receive rules never deliver as replays (IEC 62351-6 section
#: 6.2): a refusal line on the timeline, as an authentication refusal has
REPLAY_CLASSES = {
    "replay": "stNum/sqNum do not advance: an old frame sent again",
    "stale": "a state already seen, or whose t is older than the stream's beyond the skew",
}

#: classes of a frame that carries a state: its refusal is a timeline line, a refused
#: retransmission of it only a count
STATE_CLASSES = frozenset({"first", "new_state", "missed_states", "restart"})


def percentiles(xs_ns: list[int]) -> dict[str, float]:
    """p50/p99/p99.9/max in microseconds (empty -> zeros)."""
    if not xs_ns:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "p99.9": 0.0, "max": 0.0}
    s = sorted(xs_ns)
    n = len(s)

    def at(q: float) -> float:
        return s[min(n - 1, int(q * n))] / 1000.0

    return {"n": n, "p50": at(0.5), "p99": at(0.99), "p99.9": at(0.999), "max": s[-1] / 1000}


def format_percentiles(rows: dict[str, dict[str, float]], unit: str = "us") -> list[str]:
    out = [f"  {'path':44} {'n':>6} {'p50':>9} {'p99':>9} {'p99.9':>9} {'max':>9}  ({unit})"]
    for name, p in rows.items():
        out.append(
            f"  {name:44} {p['n']:>6} {p['p50']:>9.1f} {p['p99']:>9.1f} "
            f"{p['p99.9']:>9.1f} {p['max']:>9.1f}"
        )
    return out


def report_block(
    clock: str,
    timeline: list[str],
    anomalies: list[str],
    latency_title: str,
    latency: dict[str, dict[str, float]],
    lgos: list[LgosView] | None = None,
) -> list[str]:
    """The part every run report shares: timeline, anomalies, the subscriptions' LGOS,
    latency table."""
    out = [
        f"Timeline ({clock}):",
        *("  " + printable(x) for x in timeline),
        "",
        "Anomalies found:",
        *(printable(x) for x in anomalies or ["  none"]),
        "",
    ]
    if lgos is not None:
        out += [*lgos_lines(lgos), ""]
    return [*out, f"Latency ({latency_title}):", *format_percentiles(latency)]


def lgos_lines(views: list[LgosView]) -> list[str]:
    """The LGOS view of each subscription (IEC 61850-7-4) as a table, with the frames the
    receive rules refused, by reason."""
    out = [
        "Subscriptions (LGOS):",
        f"  {'stream':12} {'St':5} {'SimSt':5} {'LastStNum':>9} {'ConfRevNum':>10} "
        f"{'RxConfRevNum':>12} {'NdsCom':6} {'ErrSt':12} {'source':17}  refused",
    ]
    for v in views:
        refused = ", ".join(f"{k} {n}" for k, n in v.refused) or "-"
        out.append(
            f"  {v.label:12} {str(v.st).lower():5} {str(v.sim_st).lower():5} "
            f"{_num(v.last_st_num):>9} {_num(v.conf_rev):>10} {_num(v.rx_conf_rev):>12} "
            f"{str(v.nds_com).lower():6} {v.err:12} {v.src or '-':17}  {refused}"
        )
    if len(views) == 0:
        out.append("  none")
    return out


def _num(n: int | None) -> str:
    return "-" if n is None else str(n)


def describe(r: Any) -> str | None:
    """One report as a timeline line without its time (None: not a line): the demo's
    timeline prefixes the run's clock, `run` logs it as a record (`timeline` events)."""
    for kind, line in _DESCRIBE:
        if isinstance(r, kind):
            return line(r)
    return None


def _bay_step(r: BayStep) -> str | None:
    moves = [(a, b) for a, _, b in r.transitions if a != b]
    if not moves:
        return None
    return f"bay      {r.event}: " + ", ".join(f"{a} -> {b}" for a, b in moves)


def _input_changed(r: InputChanged) -> str:
    state = "valid" if r.valid else f"invalid ({r.reason})"
    return f"input    {r.input}: {state} -> {r.consequence}"


def _lgos(r: LgosView) -> str:
    if r.st:
        state = "valid" + (", simulated stream (SimSt)" if r.sim_st else "")
    else:
        state = f"NOT valid: {r.err} ({ERR_TEXT.get(r.err, r.err)})"
    return f"lgos     {r.label}: {state}"


def _mode(r: ModeChanged) -> str:
    sim = "simulation on" if r.simulation else "simulation off"
    return f"mode     {r.mode}, {sim} ({r.origin or 'operator'})"


def _alarm(r: Alarm) -> str:
    return f"ALARM    {r.name} {'raised' if r.active else 'cleared'}" + (
        f": {r.detail}" if r.detail else ""
    )


def _notify(r: Notify) -> str:
    if r.topic == "confirm":
        d = r.data
        return (
            f"agent    {d['session']} asks to confirm {d['step']} "
            f"({d['tool']} {d['args']}): confirmed"
        )
    data = r.data
    if isinstance(data, (tuple, list)):  # reasons, e.g. close_refused
        data = "; ".join(str(x) for x in data)
    return f"notice   {r.topic}" + (f": {data}" if data not in (None, "") else "")


def _run_tool(r: RunTool) -> str:
    again = f", attempt {r.attempt}" if r.attempt > 1 else ""
    return f"agent    {r.session} runs {r.step} ({r.tool} {r.args}{again})"


def _stream_state(r: StreamState) -> str:
    side = "" if r.side == "-" else f" side {r.side}"
    return f"goose    {r.stream.split('@')[0]}{side} {r.state}"


def _frame(r: FrameClassified) -> str:
    if r.refused is not None:
        return (
            f"refused  {r.stream.split('@')[0]} st={r.st_num} sq={r.sq_num} "
            f"{r.cls}: {r.refused} ({_refusal_text(r.refused)})"
        )
    flags = f" [{', '.join(r.flags)}]" if r.flags else ""
    if r.cls in REPLAY_CLASSES:  # never delivered: the receive rules refused it
        return (
            f"refused  {r.stream.split('@')[0]} st={r.st_num} sq={r.sq_num} "
            f"{r.cls}{flags} ({REPLAY_CLASSES[r.cls]})"
        )
    return f"frame    {r.stream.split('@')[0]} st={r.st_num} sq={r.sq_num} {r.cls}{flags}"


def _rx_drops(r: RxDrops) -> str:
    return (
        f"network  {r.side} ({r.iface}): the kernel dropped {r.new} frame(s), {r.drops} since start"
    )


def _link_event(r: LinkEvent) -> str | None:
    if r.kind in ("position_changed",):
        return f"device   position {r.get('position')} ({r.get('cause')})"
    if r.kind in ("operation_failed", "cmd_failed", "device_reset", "link_state"):
        what = r.get("state") or r.reason or ""
        return "device   " + " ".join(x for x in (r.kind, r.command, what) if x)
    return None


#: report type -> its line, in the order a report is matched (the first it is an
#: instance of); a report of no type here is not a line
_DESCRIBE: tuple[tuple[type, Callable[[Any], str | None]], ...] = (
    (BayStep, _bay_step),
    (DeviceCommand, lambda r: f"device   {r.command.upper()} sent ({r.reason})"),
    (
        CommandWithheld,
        lambda r: f"device   {r.command.upper()} withheld ({r.reason}): mode {r.mode}",
    ),
    (InputChanged, _input_changed),
    (LgosView, _lgos),
    (ModeChanged, _mode),
    (PublishTopic, lambda r: f"goose    published {r.topic}"),
    (Alarm, _alarm),
    (Notify, _notify),
    (RunTool, _run_tool),
    (Respond, lambda r: f"agent    {r.session} ended {r.outcome}: {r.text}"),
    (StreamState, _stream_state),
    (
        PublisherSides,
        lambda r: f"goose    publisher {r.gocb_ref} on {','.join(r.active)} ({r.reason})",
    ),
    (FrameClassified, _frame),
    (RxDrops, _rx_drops),
    (LinkEvent, _link_event),
)


class Timeline:
    """Collects reports as (virtual time, report) and turns them into lines."""

    def __init__(self, t0_ns: int) -> None:
        self.t0 = t0_ns
        self.items: list[tuple[int, Any]] = []
        self.classes: Counter[str] = Counter()
        self.flags: Counter[str] = Counter()
        #: frames the receive rules refused, by reason; commands the mode withheld
        self.refused: Counter[str] = Counter()
        self.withheld: Counter[str] = Counter()

    def add(self, t_ns: int, report: Any) -> None:
        if type(report) is FrameClassified:
            self.classes[report.cls] += 1
            for f in report.flags:
                self.flags[f] += 1
            if report.refused is not None:
                self.refused[report.refused] += 1
                if report.cls not in STATE_CLASSES and self.refused[report.refused] > 1:
                    return  # the repeats of a refused state: counted
            elif report.cls in NORMAL_CLASSES and not report.flags:
                return
            if report.cls == "duplicate" and report.side in ("A", "B"):
                return  # the other network's copy of an A/B frame: expected, counted
        elif type(report) is CommandWithheld:
            self.withheld[report.command] += 1
        self.items.append((t_ns, report))

    def line(self, t_ns: int, r: Any) -> str | None:
        text = describe(r)
        return None if text is None else f"{(t_ns - self.t0) / 1e9:9.3f} s  {text}"

    def lines(self) -> list[str]:
        return [x for t, r in self.items if (x := self.line(t, r)) is not None]

    def anomalies(self) -> list[str]:
        out = [
            f"  {n} frame(s) classified {c}"
            + (" (mostly the second copies of A/B frames)" if c == "duplicate" else "")
            for c, n in sorted(self.classes.items())
            if c not in NORMAL_CLASSES
        ]
        out += [f"  {n} frame(s) flagged {f}" for f, n in sorted(self.flags.items())]
        out += [
            f"  {n} frame(s) refused: {why} ({ERR_TEXT.get(why, why)})"
            for why, n in sorted(self.refused.items())
        ]
        out += [
            f"  {n} {c.upper()} command(s) withheld by the mode" for c, n in self.withheld.items()
        ]
        invalid = Counter(
            (r.input, r.reason)
            for _, r in self.items
            if isinstance(r, InputChanged) and not r.valid
        )
        out += [
            f"  input {name} fell back to fail-safe {n} time(s): {why}"
            for (name, why), n in sorted(invalid.items())
        ]
        alarms = Counter(r.name for _, r in self.items if isinstance(r, Alarm) and r.active)
        out += [f"  alarm {a} raised {n} time(s)" for a, n in sorted(alarms.items())]
        dropped: Counter[tuple[str, str]] = Counter()
        for _, r in self.items:
            if isinstance(r, RxDrops):
                dropped[(r.side, r.iface)] += r.new
        out += [
            f"  {n} frame(s) dropped by the kernel on network {side} ({iface}): receive ring full"
            for (side, iface), n in sorted(dropped.items())
        ]
        lost = Counter(
            (r.stream.split("@")[0], r.side)
            for _, r in self.items
            if isinstance(r, StreamState) and r.state == "lost"
        )
        out += [
            f"  stream {s}{'' if side == '-' else ' side ' + side} lost {n} time(s)"
            for (s, side), n in sorted(lost.items())
        ]
        return out
