"""`goosectl web` without a browser: where it listens, what it refuses to start with, and
bad requests answered with a reason while the server goes on serving."""

from __future__ import annotations

import http.client
import json
import shutil
import ssl
import subprocess
import time
from pathlib import Path

import pytest

from goosectl.controller.commands.web import DEFAULT_BIND
from tests.support.peers import _require
from tests.support.procs import goosectl


def test_default_bind_is_loopback() -> None:
    assert DEFAULT_BIND.startswith("127.0.0.1:")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--bind", "0.0.0.0:0"], "needs TLS and sign-in"),
        (["--bind", "nohost"], "expected HOST:PORT"),
        (["--bind", "127.0.0.1:99999"], "0 to 65535"),
        (["--tls-cert", "c.pem"], "go together"),
    ],
)
def test_refuses_to_start_unsafely(args: list[str], said: str) -> None:
    done = goosectl("web", *args, check=False, timeout=60)
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text("OPERATOR alice alice-0123456789abcdef\n")
    f.chmod(0o644)
    done = goosectl("web", "--tokens", str(f), "--bind", "127.0.0.1:0", check=False, timeout=60)
    assert done.returncode == 2 and "chmod 600" in done.stderr, done.stderr
    f.write_text("ADMIN alice alice-0123456789abcdef\n")
    f.chmod(0o600)
    done = goosectl("web", "--tokens", str(f), "--bind", "127.0.0.1:0", check=False, timeout=60)
    assert done.returncode == 2 and f"{f}:1:" in done.stderr, done.stderr


def _ask(port: int, method: str, path: str, body: bytes = b"", **headers: str):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request(method, path, body=body or None, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_bad_requests_get_a_reason_and_the_server_goes_on(start_web, tmp_path: Path) -> None:
    f = tmp_path / "tokens"
    f.write_text("OPERATOR alice alice-0123456789abcdef\n")
    f.chmod(0o600)
    web = start_web(
        "--control", str(tmp_path / "none.sock"), "--journal", str(tmp_path / "none.sqlite"),
        "--tokens", str(f), "--bind", "127.0.0.1:0",
    )  # fmt: skip
    p = web.port
    op = {"Authorization": "Bearer alice-0123456789abcdef"}
    cases = [
        (("GET", "/nowhere"), op, 404),
        (("GET", "/nowhere"), {}, 401),
        (("GET", "/api/state"), {}, 401),  # not signed in
        (("GET", "/api/state"), op, 502),  # no controller there: said, not crashed
        (("GET", "/events"), {**op, "Last-Event-ID": "abc"}, 400),
        (("GET", "/static/../server.py"), {}, 404),
        (("GET", "/"), {"Host": "evil.example"}, 421),  # DNS rebinding
        (("POST", "/api/sessions/s1/confirm", b"x" * 10_000), op, 413),
        (("POST", "/api/sessions/s1/confirm", b"{not json"), op, 400),
        (("POST", "/api/sessions/s1/confirm", b'{"step": "<b>"}'), op, 400),
        (("POST", "/api/sessions/x;rm/confirm", b'{"step": "a"}'), op, 404),
        (("POST", "/api/sessions/s1/explode", b'{"step": "a"}'), op, 404),
        (("POST", "/api/sessions/s1/confirm", b'{"step": "a"}'), {}, 401),
        (("POST", "/login", b"token=wrong"), {"Origin": f"http://127.0.0.1:{p}"}, 401),
        (("POST", "/login", b"token=alice-0123456789abcdef"), {"Origin": "http://evil"}, 403),
    ]
    for (method, path, *body), headers, code in cases:
        status, reply = _ask(p, method, path, *(body or [b""]), **headers)
        assert status == code, (method, path, headers, status, reply[:200])
        if status >= 400 and path != "/" and status != 401:
            assert json.loads(reply)["error"], reply
    status, me = _ask(p, "GET", "/api/me", **op)
    assert status == 200 and json.loads(me)["role"] == "OPERATOR"


def test_tls_and_tokens_elsewhere(start_web, tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    _require(openssl is not None, "openssl is not installed (Debian package openssl)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [str(openssl), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    f = tmp_path / "tokens"
    f.write_text("VIEWER bob bob-0123456789abcdef\n")
    f.chmod(0o600)
    web = start_web(
        "--tls-cert", str(cert), "--tls-key", str(key), "--tokens", str(f),
        "--bind", "127.0.0.1:0",
    )  # fmt: skip
    assert web.url.startswith("https://")
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False
    c = http.client.HTTPSConnection("127.0.0.1", web.port, timeout=10, context=ctx)
    c.request("GET", "/api/me", headers={"Authorization": "Bearer bob-0123456789abcdef"})
    r = c.getresponse()
    assert r.status == 200 and json.loads(r.read())["role"] == "VIEWER"
    c.close()
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        _ask(web.port, "GET", "/api/me")  # plain HTTP to the TLS port: no page


def _journal_ids(port: int, headers: dict[str, str], path: str = "/events") -> list[int]:
    """The ids of the journal events an event stream sends before its first snapshot (the
    backlog: every row it owes the client)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type", "").startswith("text/event-stream")
    ids: list[int] = []
    event: dict[str, str] = {}
    try:
        while True:
            line = r.fp.readline().decode().rstrip("\n")
            if line:
                key, _, value = line.partition(": ")
                event[key] = value
                continue
            if event.get("event") == "journal":  # a batch of rows, its id the last one's
                batch = [int(r["seq"]) for r in json.loads(event["data"])]
                assert batch and int(event["id"]) == batch[-1], event
                ids.extend(batch)
            elif event.get("event") == "state":
                return ids
            event = {}
    finally:
        c.close()


def test_last_event_id_resumes_after_that_row(start_web, tmp_path: Path) -> None:
    from tests.web.conftest import journal_seqs
    from tests.web.test_hostile import hostile_capture

    journal = tmp_path / "replay.sqlite"
    goosectl("replay", str(hostile_capture(tmp_path / "c.pcap")), "--journal", str(journal))
    seqs = journal_seqs(journal)
    assert len(seqs) > 4
    web = start_web(
        "--journal", str(journal), "--control", str(tmp_path / "none.sock"), "--bind", "127.0.0.1:0"
    )
    assert _journal_ids(web.port, {}) == seqs  # a first connect: the whole (short) journal
    assert _journal_ids(web.port, {"Last-Event-ID": str(seqs[2])}) == seqs[3:]
    assert _journal_ids(web.port, {}, f"/events?after={seqs[-2]}") == seqs[-1:]
    assert _journal_ids(web.port, {"Last-Event-ID": str(seqs[-1])}) == []


def _first_state(port: int) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("GET", "/events")
    r = c.getresponse()
    event: dict[str, str] = {}
    try:
        while True:
            line = r.fp.readline().decode().rstrip("\n")
            if line:
                key, _, value = line.partition(": ")
                event[key] = value
            elif event.get("event") == "state":
                return json.loads(event["data"])
            else:
                event = {}
    finally:
        c.close()


def test_a_crossed_limit_is_an_alarm_with_its_isa_state(sim, start_web, tmp_path: Path) -> None:
    import socket

    from tests.control.conftest import Controller

    c = Controller(tmp_path, sim.port, {"control": {"max_line_bytes": 256}})
    try:
        with socket.socket(socket.AF_UNIX) as s:  # a line over the cap: a limit crossed
            s.settimeout(10)
            s.connect(str(c.sock))
            s.sendall(b'{"op": "list", "x": "' + b"y" * 1000 + b'"}\n')
            assert b"max_line_bytes" in s.recv(4096)
        web = start_web("--control", str(c.sock), "--state", str(c.state), "--bind", "127.0.0.1:0")
        alarms = []
        for _ in range(40):
            alarms = [a for a in _first_state(web.port)["alarms"] if "control.line" in a["text"]]
            if alarms:
                break
            time.sleep(0.25)
        assert alarms and alarms[0]["state"] == "active", alarms
    finally:
        c.stop()
