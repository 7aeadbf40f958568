"""libiec61850's own GOOSE ping-pong between two namespaces: the wire benchmark's reference.

Why: "goosectl answers a trip in X us on the wire" means little alone; beside the raw
AF_PACKET echo (the kernel's floor, lab.wire_floor) it says what our Python
costs, and beside libiec61850 doing the same exchange in C it says what a mature GOOSE
stack costs on the same veth, the same kernel and the same (shared) CPUs.

The exchange (iec61850_pingpong.c, next to this file): in namespace A libiec61850's
GoosePublisher sends PING (a new state, stNum+1, an INT32 sequence number in the data set);
in namespace B a GooseSubscriber's listener answers each one by publishing PONG with the
same number; A times send -> PONG parsed by its own GooseReceiver (CLOCK_MONOTONIC).
Both sides are libiec61850's receive loop (wait on the socket, GooseReceiver_tick).

The C program is compiled once per source/library version with the system `gcc` against
the shared library in the pyiec61850-ng wheel (found next to the installed package, so it
is the same build the interop tests use); the wheel has no headers, so the program
declares the handful of public API functions it calls. `build()` raises PingPongError
saying what is missing (gcc, the wheel, the library) rather than falling back quietly.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from goosectl.lab.netns import NetLab

SOURCE = Path(__file__).with_name("iec61850_pingpong.c")
IFACE = "pp0"


class PingPongError(RuntimeError):
    """The reference could not be built or did not answer; the message says why."""


def wheel_library() -> Path:
    """The libiec61850 shared object shipped in the pyiec61850-ng wheel."""
    try:
        import pyiec61850
    except ImportError as exc:
        raise PingPongError(f"pyiec61850-ng is not installed (pip pyiec61850-ng): {exc}") from exc
    site = Path(pyiec61850.__file__).resolve().parents[1]
    libs = sorted(site.glob("pyiec61850_ng.libs/libiec61850*.so*"))
    if not libs:
        raise PingPongError(f"no libiec61850*.so in {site / 'pyiec61850_ng.libs'}")
    return libs[0]


def build(cache: Path | None = None) -> Path:
    """Compile the ping-pong program (cached by source and library); its path."""
    gcc = shutil.which("gcc")
    if gcc is None:
        raise PingPongError("gcc is not installed: the libiec61850 C reference cannot be built")
    lib = wheel_library()
    key = hashlib.sha256(SOURCE.read_bytes() + str(lib).encode()).hexdigest()[:16]
    out_dir = cache or Path(tempfile.gettempdir()) / "goosectl-iec61850-pingpong"
    exe = out_dir / f"pingpong-{key}"
    if exe.exists():
        return exe
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")  # two builders never share one
    cmd = [gcc, "-O2", "-Wall", "-o", str(tmp), str(SOURCE), str(lib),
           f"-Wl,-rpath,{lib.parent}"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise PingPongError(f"compiling {SOURCE.name} failed:\n{done.stderr}")
    tmp.replace(exe)  # atomic: a concurrent build never runs a half-written file
    return exe


def sample(
    n: int, warmup: int = 200, *, exe: Path | None = None, quiet_s: float = 0.0
) -> list[int]:
    """``n`` libiec61850 ping-pong round trips (ns) across a fresh veth pair; ``quiet_s``
    asleep before each timed one (as `wire_floor.WireFloor.sample`)."""
    exe = exe or build()
    with NetLab() as lab:
        a, b = lab.namespace(), lab.namespace()
        lab.veth(a, b, a=IFACE, b=IFACE)
        pong = b.popen([str(exe), "pong", IFACE], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert pong.stdout is not None and pong.stderr is not None  # both piped above
        line = pong.stdout.readline()
        if line.strip() != "ready":
            pong.kill()
            raise PingPongError(f"libiec61850 pong did not start: {line!r} {pong.stderr.read()}")
        quiet_us = str(round(quiet_s * 1e6))
        done = a.run([str(exe), "ping", IFACE, str(n), str(warmup), quiet_us], check=False,
                     timeout=60 + n * (0.01 + quiet_s))  # fmt: skip
        pong.terminate()
        pong.communicate(timeout=5)
    if done.returncode != 0:
        raise PingPongError(f"libiec61850 ping exited {done.returncode}: {done.stderr.strip()}")
    times = [int(x) for x in done.stdout.split()]
    if len(times) != n:
        raise PingPongError(f"libiec61850 ping printed {len(times)} round trips, expected {n}")
    return times
