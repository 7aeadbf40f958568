"""Where a process's time went while a benchmark ran: each thread's CPU time and its wait
for a CPU, and the host's stolen time, read from /proc before and after.

Why: a wire trip's tail mixes goosectl's work with waiting, and the two kinds of waiting
point at different fixes. A thread that was runnable but not running (the kernel's
run-queue delay, /proc/PID/task/TID/schedstat) waited for a CPU other tasks had; a loop
whose frame took milliseconds while its thread neither ran nor waited for a CPU was
blocked (the GIL held by another thread, a page fault, a write to a full pipe). Time the
hypervisor gave another guest (steal, /proc/stat) is lost to every process alike. Printed
beside a tail, the numbers say whose it is; they are not subtracted from anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: /proc/stat's clock ticks per second (USER_HZ)
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's totals: CPU time and run-queue wait (ns), times it was scheduled."""

    name: str
    cpu_ns: int
    wait_ns: int
    slices: int


@dataclass(frozen=True)
class Snapshot:
    """A process's threads and the host's CPU totals at one moment."""

    threads: dict[int, ThreadTimes]
    host_busy_s: float
    host_steal_s: float
    host_total_s: float


def _thread(task: Path) -> ThreadTimes | None:
    try:
        name = (task / "comm").read_text().strip()
        cpu, wait, slices = (int(x) for x in (task / "schedstat").read_text().split()[:3])
    except (OSError, ValueError):
        return None  # the thread ended between the listing and the read
    return ThreadTimes(name, cpu, wait, slices)


def _host() -> tuple[float, float, float]:
    """(busy, steal, total) seconds of all CPUs since boot, from /proc/stat's first line."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    steal = fields[7] if len(fields) > 7 else 0
    total = sum(fields[:8])
    return (total - idle - steal) * _TICK_S, steal * _TICK_S, total * _TICK_S


def threads(pid: int) -> dict[int, ThreadTimes]:
    """The threads of `pid` alive now, by thread id (empty: the process is gone)."""
    out: dict[int, ThreadTimes] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        t = _thread(task)
        if t is not None:
            out[int(task.name)] = t
    return out


def snapshot(pid: int) -> Snapshot:
    """The threads of `pid` (those alive now) and the host's totals."""
    return Snapshot(threads(pid), *_host())


def between(before: Snapshot, after: Snapshot) -> dict[str, object]:
    """What happened between two snapshots of one process: per thread (by name), CPU and
    run-queue wait in ms and the number of times it was scheduled; the host's busy and
    stolen share of its CPUs."""
    threads: dict[str, dict[str, float]] = {}
    for tid, a in after.threads.items():
        b = before.threads.get(tid, ThreadTimes(a.name, 0, 0, 0))
        threads[f"{a.name}/{tid}"] = {
            "cpu_ms": round((a.cpu_ns - b.cpu_ns) / 1e6, 1),
            "wait_for_cpu_ms": round((a.wait_ns - b.wait_ns) / 1e6, 1),
            "scheduled": a.slices - b.slices,
        }
    total = max(after.host_total_s - before.host_total_s, 1e-9)
    return {
        "threads": threads,
        "host_busy": round((after.host_busy_s - before.host_busy_s) / total, 3),
        "host_steal": round((after.host_steal_s - before.host_steal_s) / total, 4),
    }
