"""Throw-away network namespaces and veth links for tests that need a real Ethernet wire.

Why namespaces: a raw-socket test must send real frames through the real kernel path
(VLAN stripping, multicast filtering, PACKET_OUTGOING) without touching the machine's
real interfaces or other engineers' tests running at the same time. Each `NetLab`
creates namespaces named ``gctl-<random>``, veth pairs between them (or between the
root namespace and one of them), and removes all of it on exit, even on an error or
Ctrl-C (SIGINT is held back while cleaning up and re-delivered afterwards). Leftovers of
a killed run are removed by `cleanup_stale()`.

Two ways to act inside a namespace:

- `Namespace.entered()` moves only the calling thread into it (setns(2)); sockets opened
  there stay in that namespace after the thread leaves, so one test process can hold a
  raw socket on each end of a veth pair.
- `Namespace.run/popen/python` start a process with `ip netns exec`, for peers that must
  run separately (libiec61850, echo peers, anything measured for latency).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PREFIX = "gctl-"
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
IFNAMSIZ = 16


class NetnsError(RuntimeError):
    """An `ip` command failed; the message holds the command and its stderr."""


class VlanUnsupportedError(NetnsError):
    """This kernel cannot create 802.1Q sub-interfaces (no 8021q support)."""


def _run(argv: Sequence[str], *, check: bool = True, timeout: float = 30.0, **kw):
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise NetnsError(
            f"`{' '.join(argv)}` failed with exit {proc.returncode}: {proc.stderr.strip()}"
        )
    return proc


#: the checkout (or site-packages) root, so `python -m` in a namespace finds this code
REPO = Path(__file__).resolve().parents[1]


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run `ip [-n ns] args...`; raises NetnsError with stderr on failure."""
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    return _run(argv, check=check)


def _python_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(f"setns(CLONE_NEWNET) failed: {os.strerror(err)}")


@dataclass(eq=False)
class Namespace:
    """One network namespace owned by a `NetLab`."""

    name: str
    lab: NetLab

    def ip(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return ip(*args, ns=self.name, check=check)

    def run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = 60.0, **kw
    ) -> subprocess.CompletedProcess:
        """Run a command inside the namespace and wait for it (text output captured)."""
        return _run(["ip", "netns", "exec", self.name, *argv], check=check, timeout=timeout, **kw)

    def popen(self, argv: Sequence[str], **kw) -> subprocess.Popen:
        """Start a command inside the namespace; the lab kills it on exit if still running."""
        kw.setdefault("env", _python_env())
        kw.setdefault("cwd", str(REPO))
        proc = subprocess.Popen(["ip", "netns", "exec", self.name, *argv], **kw)
        self.lab._procs.append(proc)
        return proc

    def python(
        self, code: str, *args: str, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess:
        """Run Python source in the namespace with the repository importable."""
        return self.run(
            [sys.executable, "-c", code, *args],
            check=check,
            timeout=timeout,
            env=_python_env(),
            cwd=str(REPO),
        )

    def python_module(self, module: str, *args: str, **kw) -> subprocess.Popen:
        """Start `python -m module args` in the namespace (stdout piped unless overridden)."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        return self.popen([sys.executable, "-u", "-m", module, *args], **kw)

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Move the calling thread into this namespace for the block, then back."""
        with open("/proc/thread-self/ns/net", "rb") as home:
            with open(NETNS_DIR / self.name, "rb") as target:
                _setns(target.fileno())
            try:
                yield
            finally:
                _setns(home.fileno())

    def link_set(self, ifname: str, up: bool) -> None:
        """Bring a link down or up (failover tests)."""
        self.ip("link", "set", ifname, "up" if up else "down")

    def add_vlan(self, parent: str, vid: int, *, up: bool = True) -> str:
        """Create ``parent.vid`` (802.1Q) in this namespace and return its name."""
        return self.lab._add_vlan(self.name, parent, vid, up=up)

    def links(self) -> list[str]:
        out = self.ip("-o", "link", "show").stdout
        return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line]

    def mac(self, ifname: str) -> bytes:
        """The interface's MAC (asked from `ip`: /sys shows only the caller's namespace)."""
        out = self.ip("-o", "link", "show", ifname).stdout
        return bytes.fromhex(out.split("link/ether", 1)[1].split()[0].replace(":", ""))


@dataclass(frozen=True)
class Veth:
    """A veth pair: end ``a`` in ``ns_a`` and end ``b`` in ``ns_b`` (None = root namespace)."""

    a: str
    b: str
    ns_a: Namespace | None
    ns_b: Namespace | None

    def wait_up(self, timeout: float = 5.0) -> None:
        """Wait until both ends are operationally up: a frame sent on a veth before then is
        dropped silently, which made tests flaky under load. Carrier (LOWER_UP) is not
        enough: the kernel sets it at once, but attaches the real queueing discipline only
        when its link-watch work runs (rate-limited, up to a second later), and until then
        the device's noop qdisc drops every frame; operstate UP comes with that work."""
        deadline = time.monotonic() + timeout
        ends = ((self.a, self.ns_a), (self.b, self.ns_b))
        while True:
            states = []
            for name, ns in ends:
                argv = ["-o", "link", "show", name]
                out = (ns.ip(*argv) if ns is not None else ip(*argv)).stdout
                states.append("state UP" in out)
            if all(states):
                return
            if time.monotonic() > deadline:
                raise NetnsError(f"veth {self.a}/{self.b} did not come up within {timeout} s")
            time.sleep(0.01)

    def set(self, end: str, up: bool) -> None:
        """Set end "a" or "b" down/up."""
        name, ns = (self.a, self.ns_a) if end == "a" else (self.b, self.ns_b)
        if ns is None:
            ip("link", "set", name, "up" if up else "down")
        else:
            ns.link_set(name, up)


_OPEN_LABS: weakref.WeakSet[NetLab] = weakref.WeakSet()


class NetLab:
    """Namespaces and links for one test; a context manager that always cleans up."""

    def __init__(self, prefix: str = PREFIX) -> None:
        self.prefix = prefix
        self.tag = secrets.token_hex(3)
        self.namespaces: list[Namespace] = []
        self._root_links: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._count = 0
        self._closed = False
        _OPEN_LABS.add(self)

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _name(self) -> str:
        self._count += 1
        return f"{self.prefix}{self.tag}-{self._count}"

    def namespace(self) -> Namespace:
        """Create a new empty namespace (loopback up) with a unique ``gctl-`` name."""
        name = self._name()
        ip("netns", "add", name)
        ns = Namespace(name, self)
        self.namespaces.append(ns)
        ns.ip("link", "set", "lo", "up")
        return ns

    def veth(
        self,
        ns_a: Namespace | None,
        ns_b: Namespace | None,
        *,
        a: str | None = None,
        b: str | None = None,
        up: bool = True,
    ) -> Veth:
        """Create a veth pair; a root-namespace end gets a unique ``gctl-`` name."""
        if ns_a is None and ns_b is None:
            raise NetnsError("a veth pair needs at least one end in a lab namespace")
        a = a or (self._name() if ns_a is None else f"veth{self._count}a")
        b = b or (self._name() if ns_b is None else f"veth{self._count}b")
        for name in (a, b):
            if len(name) >= IFNAMSIZ:
                raise NetnsError(f"interface name {name!r} longer than 15 characters")
        argv = ["link", "add", a]
        if ns_a is not None:
            argv += ["netns", ns_a.name]
        argv += ["type", "veth", "peer", "name", b]
        if ns_b is not None:
            argv += ["netns", ns_b.name]
        ip(*argv)
        self._root_links += [n for n, ns in ((a, ns_a), (b, ns_b)) if ns is None]
        pair = Veth(a, b, ns_a, ns_b)
        if up:
            pair.set("a", True)
            pair.set("b", True)
            pair.wait_up()
        return pair

    def _add_vlan(self, ns: str | None, parent: str, vid: int, *, up: bool) -> str:
        name = f"{parent}.{vid}"
        if len(name) >= IFNAMSIZ:
            raise NetnsError(f"VLAN interface name {name!r} longer than 15 characters")
        proc = ip("link", "add", "link", parent, "name", name, "type", "vlan", "id", str(vid),
                  ns=ns, check=False)  # fmt: skip
        if proc.returncode != 0:
            if "Unknown device type" in proc.stderr:
                raise VlanUnsupportedError(
                    f"cannot create {name}: this kernel has no 802.1Q (8021q) support"
                )
            raise NetnsError(f"cannot create VLAN {name}: {proc.stderr.strip()}")
        if ns is None:
            self._root_links.append(name)
        if up:
            ip("link", "set", name, "up", ns=ns)
        return name

    def close(self) -> None:
        """Kill started processes, delete root-namespace links and namespaces. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with _sigint_held():
            errors: list[str] = []
            for proc in self._procs:
                _stop(proc)
            for link in self._root_links:
                if Path(f"/sys/class/net/{link}").exists():
                    done = ip("link", "del", link, check=False)
                    if done.returncode != 0 and "Cannot find device" not in done.stderr:
                        errors.append(done.stderr.strip())
            for ns in self.namespaces:
                _kill_pids(ns.name)
                done = ip("netns", "del", ns.name, check=False)
                if done.returncode != 0:
                    errors.append(done.stderr.strip())
            _OPEN_LABS.discard(self)
        if errors:
            raise NetnsError("cleanup left something behind: " + "; ".join(errors))


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=3)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=3)


def _kill_pids(ns: str) -> None:
    out = ip("netns", "pids", ns, check=False).stdout.split()
    for pid in out:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def _sigint_held() -> Iterator[None]:
    """Defer SIGINT/SIGTERM while cleaning up; a pending one is delivered afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@atexit.register
def _close_forgotten() -> None:
    for lab in list(_OPEN_LABS):
        with contextlib.suppress(Exception):
            lab.close()


def list_namespaces(prefix: str = PREFIX) -> list[str]:
    """Names of existing namespaces that start with ``prefix``."""
    out = ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def list_root_links(prefix: str = PREFIX) -> list[str]:
    """Root-namespace interfaces whose name starts with ``prefix``."""
    return sorted(p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(prefix))


def cleanup_stale(prefix: str = PREFIX) -> list[str]:
    """Remove namespaces and root links left by killed runs; returns what was removed.

    Do not call it while other test sessions on the machine may be using the prefix;
    it is for a fresh CI worker or a developer's manual cleanup.
    """
    removed = []
    for link in list_root_links(prefix):
        if ip("link", "del", link, check=False).returncode == 0:
            removed.append(link)
    for ns in list_namespaces(prefix):
        _kill_pids(ns)
        if ip("netns", "del", ns, check=False).returncode == 0:
            removed.append(ns)
    return removed


@contextlib.contextmanager
def netlab(prefix: str = PREFIX) -> Iterator[NetLab]:
    """`with netlab() as lab:` - the functional spelling of `NetLab`."""
    lab = NetLab(prefix)
    try:
        yield lab
    finally:
        lab.close()


_VLAN_SUPPORTED: bool | None = None


def vlan_supported() -> bool:
    """Whether this kernel can create 802.1Q sub-interfaces (probed once, in a scratch lab)."""
    global _VLAN_SUPPORTED
    if _VLAN_SUPPORTED is None:
        with netlab() as lab:
            ns = lab.namespace()
            lab.veth(ns, ns, a="p0", b="p1")
            try:
                ns.add_vlan("p0", 10)
                _VLAN_SUPPORTED = True
            except VlanUnsupportedError:
                _VLAN_SUPPORTED = False
    return _VLAN_SUPPORTED
