"""The host's own scheduling latency, measured beside a benchmark: cyclictest as a witness.

Why: the loaded benchmark asks that no trip take 4 ms with `run --realtime` under a CPU hog
per core. A real-time task can still be held up by what no guest process controls: the
hypervisor descheduling a vCPU, a long interrupt or softirq. Whether a slow trip was the
controller's or the host's cannot be told from the trip alone. cyclictest (rt-tests, the
standard tool for this) runs a thread per CPU at SCHED_FIFO 99, above everything in the
guest, that sleeps to an absolute time and records how late it woke: on a host fit for the
4 ms bound its maximum stays far below it. Measured on this shared 2-vCPU VM, idle, 30 s:
4.7 and 7.7 ms.

`HostLatency` runs it for the duration of a `with` block, one thread per CPU this process
may use, waking every `interval_us`: 2 ms, because each wake-up preempts whatever runs for
a few microseconds, so the witness is kept sparse; a CPU stalled for longer than that holds
up at least one of its wake-ups, which comes late by at least the stall minus 2 ms.
`--laptop` leaves the host's CPU wake-up latency setting alone (by default cyclictest holds
/dev/cpu_dma_latency at 0, which would change what the benchmark measures).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from types import TracebackType

#: cyclictest's summary line of one thread: "T: 0 ( 912) P:99 I:2000 C: 1234 Min: 7 ...
#: Max: 3189"
_SUMMARY = re.compile(r"^T:\s*\d+.*?C:\s*(\d+).*?Avg:\s*(\d+)\s+Max:\s*(\d+)", re.MULTILINE)


class HostLatencyError(RuntimeError):
    """cyclictest is missing, refused to run, or printed no summary (the message says)."""


@dataclass(frozen=True)
class HostLatencyResult:
    #: per CPU: (wake-ups, mean late us, max late us)
    per_cpu: tuple[tuple[int, int, int], ...]

    @property
    def max_us(self) -> int:
        return max(m for _, _, m in self.per_cpu)

    def as_dict(self) -> dict[str, object]:
        return {
            "max_us": self.max_us,
            "per_cpu": [{"wakeups": c, "avg_us": a, "max_us": m} for c, a, m in self.per_cpu],
        }

    def __str__(self) -> str:
        cpus = ", ".join(f"{m} us" for _, _, m in self.per_cpu)
        return f"max {self.max_us} us (per CPU {cpus})"


class HostLatency:
    """`with HostLatency() as h:` ... `h.result` once the block ends."""

    def __init__(self, interval_us: int = 2000, priority: int = 99) -> None:
        self.interval_us = interval_us
        self.priority = priority
        self.result: HostLatencyResult | None = None
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> HostLatency:
        exe = shutil.which("cyclictest")
        if exe is None:
            raise HostLatencyError("cyclictest is not installed (Debian package rt-tests)")
        cpus = sorted(os.sched_getaffinity(0))
        argv = [
            exe, "-m", "--laptop", "-q", f"-p{self.priority}", f"-t{len(cpus)}",
            f"-a{','.join(map(str, cpus))}", f"-i{self.interval_us}", "-d0",
        ]  # fmt: skip
        self._proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        proc = self._proc
        assert proc is not None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # cyclictest prints its summary and exits
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        rows = [(int(c), int(a), int(m)) for c, a, m in _SUMMARY.findall(out)]
        if exc_type is not None:
            return  # the block's own error matters more than the witness's
        if not rows:
            tail = out.strip().splitlines()[-5:]
            raise HostLatencyError(
                f"cyclictest (exit {proc.returncode}) printed no summary: {tail}"
            )
        self.result = HostLatencyResult(tuple(rows))
