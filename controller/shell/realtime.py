"""`goosectl run --realtime`: ask the kernel to treat the controller as a real-time task.

A trip frame handled in ~100 us can still wait milliseconds for a CPU when other processes
compete for it (the wire benchmark with a CPU hog on every core). What keeps it on time is
the kernel's, not ours to simulate: SCHED_FIFO (it preempts every normal task the moment a
frame arrives), `mlockall` (no page fault on the frame path), CPU affinity (a core of its
own, with `isolcpus` and IRQ affinity on a tuned host), and a garbage collector that never
starts on the frame path (frozen after start-up, collected by the loop only when idle).

Each step is asked of the kernel and its refusal is an error that names what is missing
(CAP_SYS_NICE for SCHED_FIFO, CAP_IPC_LOCK or RLIMIT_MEMLOCK for mlockall, a CPU outside
the allowed set), never a silent best effort.

A host's idle CPUs add their own delay: a CPU with nothing to run sleeps (HLT), and the
frame that wakes it waits for it to come back. In a virtual machine that is an exit to the
hypervisor and an interrupt back (the haltpoll driver here polls 0 ns before halting).
`--cpu-latency-us N` holds the kernel's CPU wake-up latency limit (PM QoS,
/dev/cpu_dma_latency, as cyclictest does) at N us while `run` lives: at 0 the cpuidle
governor picks the polling state, so an idle CPU spins and picks up the frame at once, at
the price of every CPU of the host busy while idle. The request is tied to an open file:
the kernel drops it when the process ends, however it ends.

The loop's helper threads (the journal writer, the WAL syncer, the output pump) run
SCHED_FIFO one priority below it. Left SCHED_OTHER, a helper holding the GIL was
preempted by any normal task for a whole time slice and the loop, real-time or not,
waited for the GIL that long (priority inversion through the GIL: ~5 ms stalls under a CPU
hog per core, the wire trip's max over 4 ms). One below, a helper is never preempted by a
normal task while it holds the GIL, and never delays the loop on a CPU they share.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

MCL_CURRENT = 1
MCL_FUTURE = 2

#: PM QoS: the CPU wake-up latency limit, an s32 in microseconds, held while open
CPU_DMA_LATENCY = Path("/dev/cpu_dma_latency")
_S32 = struct.Struct("=i")


class RealtimeError(Exception):
    """The kernel refused a real-time setting; the message says which and why."""


@dataclass(frozen=True)
class Realtime:
    """What `--realtime` applies: FIFO priority (1-99), optional CPU, memory locking."""

    priority: int = 50
    cpu: int | None = None
    lock_memory: bool = True
    fifo: bool = True

    def __post_init__(self) -> None:
        lo, hi = os.sched_get_priority_min(os.SCHED_FIFO), os.sched_get_priority_max(os.SCHED_FIFO)
        if not lo <= self.priority <= hi:
            raise RealtimeError(f"--rt-priority {self.priority}: SCHED_FIFO takes {lo}..{hi}")


def apply(rt: Realtime) -> list[str]:
    """Apply `rt` to this process; returns what was done (for the start-up line)."""
    done: list[str] = []
    if rt.cpu is not None:
        allowed = os.sched_getaffinity(0)
        if rt.cpu not in allowed:
            raise RealtimeError(
                f"--cpu {rt.cpu}: not among the CPUs this process may use {sorted(allowed)}"
            )
        os.sched_setaffinity(0, {rt.cpu})
        done.append(f"cpu {rt.cpu}")
    if rt.lock_memory:
        _mlockall()
        done.append("memory locked")
    if not rt.fifo:
        return done
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(rt.priority))
    except PermissionError as exc:
        raise RealtimeError(
            "SCHED_FIFO refused: needs root or CAP_SYS_NICE "
            "(or an RLIMIT_RTPRIO of at least the priority)"
        ) from exc
    done.append(f"SCHED_FIFO {rt.priority}")
    helpers = helper_threads(rt.priority)
    if helpers:
        done.append(f"{helpers} helper thread(s) SCHED_FIFO {max(1, rt.priority - 1)}")
    return done


def helper_threads(priority: int) -> int:
    """Every other thread of this process SCHED_FIFO at `priority - 1` (at least 1): call
    again after starting a thread (a new one inherits the loop's priority, not this one).
    Returns how many were set; a thread that ended meanwhile is skipped."""
    own = threading.get_native_id()
    param = os.sched_param(max(1, priority - 1))
    n = 0
    for name in os.listdir("/proc/self/task"):
        tid = int(name)
        if tid == own:
            continue
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO, param)
        except ProcessLookupError:
            continue
        n += 1
    return n


def _mlockall() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
        err = ctypes.get_errno()
        why = {
            errno.EPERM: "needs root or CAP_IPC_LOCK",
            errno.ENOMEM: "RLIMIT_MEMLOCK is too small (ulimit -l)",
        }.get(err, os.strerror(err))
        raise RealtimeError(f"mlockall refused: {why}")


def policy_of(pid: int = 0) -> str:
    """The scheduling policy of a process, by name (for status lines and tests)."""
    names = {os.SCHED_OTHER: "other", os.SCHED_FIFO: "fifo", os.SCHED_RR: "rr"}
    return names.get(os.sched_getscheduler(pid), str(os.sched_getscheduler(pid)))


class CpuLatency:
    """Holds the host's CPU wake-up latency limit at `us` microseconds while open.

    The kernel keeps the lowest limit any open holder asked for and drops this one when the
    file is closed (by `release` or by the process ending), so nothing outlives `run`."""

    def __init__(self, us: int, device: Path = CPU_DMA_LATENCY) -> None:
        if not 0 <= us <= 2_000_000_000:
            raise RealtimeError(f"--cpu-latency-us {us}: not between 0 and 2,000,000,000")
        try:
            self._fd: int | None = os.open(device, os.O_WRONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise RealtimeError(
                f"--cpu-latency-us: {device} does not exist (a kernel without PM QoS)"
            ) from None
        except PermissionError:
            raise RealtimeError(f"--cpu-latency-us: {device} is root's: needs root") from None
        os.write(self._fd, _S32.pack(us))

    def release(self) -> None:
        """Give the limit back (as `run` releases its locks)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def cpu_latency_limit(device: Path = CPU_DMA_LATENCY) -> int:
    """The limit in force now (the lowest any holder asked for), in microseconds."""
    fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return int(_S32.unpack(os.read(fd, _S32.size))[0])
    finally:
        os.close(fd)
