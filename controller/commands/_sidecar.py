"""The CPU priority of the processes beside the controller (`goosectl web`, `goosectl
uplink`): lowered by default so that on a shared machine the controller wins every
contention for a CPU, without root. `goosectl fleet collect` has the option too, normal by
default: it is the central side, and SCHED_IDLE starved it beside the brokers it reads.

SCHED_IDLE needs no privilege (a thread may always lower itself to it), runs a thread only
when no normal one wants the CPU, and is inherited by every thread started afterwards;
where it is refused (a kernel without it, a seccomp policy), nice 19 is the fallback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("goosectl.controller.sidecar")

PRIORITIES = ("idle", "normal")
DEFAULT_PRIORITY = "idle"


def add_priority_arg(p: argparse.ArgumentParser, default: str | None = DEFAULT_PRIORITY) -> None:
    """`--priority idle|normal` on a sidecar's command line (`default` None: the config's)."""
    p.add_argument(
        "--priority",
        choices=PRIORITIES,
        default=default,
        help="CPU scheduling of this process: idle (SCHED_IDLE, or nice 19 where refused: "
        "the controller always wins a CPU) or normal"
        + (f" (default: {default})" if default else " (default: the config's, idle)"),
    )


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir(Path("/proc/self/task"))]
    except OSError:
        return [0]


def lower_priority(priority: str, who: str) -> str:
    """Every thread of this process at `priority`, said on stderr and returned as words.
    Called before the process starts its threads (they inherit it); the threads already
    running are set too."""
    words = "normal CPU priority (--priority normal)" if priority == "normal" else _idle()
    print(f"{who}: {words}", file=sys.stderr, flush=True)
    log.info("%s: %s", who, words)
    return words


def _idle() -> str:
    try:
        for tid in _threads():
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        return "SCHED_IDLE (runs only when the controller and others leave a CPU free)"
    except (AttributeError, OSError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
    try:
        for tid in _threads():
            os.setpriority(os.PRIO_PROCESS, tid, 19)
        return f"nice 19 (SCHED_IDLE refused: {why})"
    except OSError as exc:
        return f"normal CPU priority: SCHED_IDLE refused ({why}), nice 19 too ({exc.strerror})"
