"""Remote procedures through a real broker, the uplink and the controller's own agent
layer: roles, the (session, step) a confirmation is for, at most once on a duplicate
delivery (the simulator's own counters say what was operated), every refusal answered with
its reason and journaled, and a broker cut while a step waits ending in the timeout."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import jsonschema
import paho.mqtt.client as paho

from goosectl.controller.fleet import topics
from goosectl.controller.fleet.mqtt import stop_loop
from goosectl.controller.fleet.remote import call
from goosectl.controller.shell.control import request
from tests.fleet.bays import Bay, wait_until
from tests.fleet.brokers import Mosquitto
from tests.support.peers import REPO
from tests.support.procs import sim_counts

PROCEDURE = """
name: pulse
version: "1"
description: set an output after the operator confirms
params:
  bay: {type: int}
equipment: ["bay{bay}"]
conflict: refuse
start: operate
steps:
  operate: {tool: device, args: {command: set_output, mask: 1, values: 1}, confirm: true,
            timeout_ms: 5000, next: report}
  report: {tool: note, args: {text: "bay {bay} pulsed"}}
"""


def setup_bay(tmp_path: Path, broker: str, confirm_timeout_s: float = 600) -> Bay:
    (tmp_path / "procedures").mkdir()
    (tmp_path / "procedures" / "pulse.yaml").write_text(PROCEDURE)
    cfg = (REPO / "examples" / "controller" / "bay1.yaml").read_text()
    (tmp_path / "bay.yaml").write_text(cfg + f"agent:\n  confirm_timeout_s: {confirm_timeout_s}\n")
    bay = Bay(tmp_path / "bay", "s1", "b1", broker).start(
        "--config", str(tmp_path / "bay.yaml"), "--procedures", str(tmp_path / "procedures")
    )
    bay.uplink()
    return bay


def schema(name: str) -> dict:
    return json.loads((REPO / "docs" / "fleet" / f"{name}.schema.json").read_text())


def ask(broker: str, req: dict, **kw: object) -> dict:
    body = {"identity": "alice@central", **req}
    jsonschema.validate({"schema": 1, "corr": "c1", **body}, schema("cmd-req"))
    resp = call([broker], "s1", "b1", body, **kw)  # type: ignore[arg-type]
    jsonschema.validate(resp, schema("cmd-resp"))
    assert resp["controller"] == "s1/b1"
    return resp


def control_rows(bay: Bay) -> list[str]:
    db = sqlite3.connect(f"file:{bay.state / 'bay.sqlite'}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT effects FROM journal WHERE machine = 'control'")]
    finally:
        db.close()


def ready(broker: str) -> None:
    """The uplink has subscribed to cmd/req: a status comes back."""
    wait_until(lambda: _try(broker), 30, "the uplink answers")


def _try(broker: str) -> bool:
    try:
        return bool(ask(broker, {"op": "status", "role": "VIEWER"}, timeout_s=2.0)["ok"])
    except TimeoutError:
        return False


def test_roles_steps_and_a_duplicate_confirm_operate_exactly_once(tmp_path: Path) -> None:
    mosq = Mosquitto(tmp_path)
    url = f"mqtt://127.0.0.1:{mosq.port}"
    bay = setup_bay(tmp_path, url)
    try:
        ready(url)
        viewer = ask(url, {"op": "run", "role": "VIEWER", "procedure": "pulse",
                           "params": {"bay": "1"}})  # fmt: skip
        assert not viewer["ok"] and "wrong role: VIEWER may not run" in viewer["error"]
        started = ask(url, {"op": "run", "role": "OPERATOR", "procedure": "pulse",
                            "params": {"bay": "1"}})  # fmt: skip
        assert started["ok"], started
        sid = started["reply"]["session"]
        st = ask(url, {"op": "status", "role": "VIEWER", "session": sid})
        wait_until(
            lambda: (
                ask(url, {"op": "status", "role": "VIEWER", "session": sid})["reply"]["status"][
                    "state"
                ]
                == "awaiting_confirmation"
            ),
            20,
            "the session waits for its confirmation",
        )
        refusals = [
            ({"role": "VIEWER", "session": sid, "step": "operate"}, "wrong role"),
            ({"role": "OPERATOR", "session": sid, "step": "report"}, "wrong step"),
            ({"role": "OPERATOR", "session": "s999", "step": "operate"}, "unknown session"),
        ]
        for req, why in refusals:
            resp = ask(url, {"op": "confirm", **req})
            assert not resp["ok"] and resp["error"].startswith(why), resp
        right = {"op": "confirm", "role": "OPERATOR", "session": sid, "step": "operate",
                 "corr": "confirm-once"}  # fmt: skip
        first = ask(url, right)
        again = ask(url, right)  # the same message delivered twice
        assert first["ok"] and not first.get("duplicate") and again["duplicate"] is True
        wait_until(
            lambda: (
                ask(url, {"op": "status", "role": "VIEWER", "session": sid})["reply"]["status"][
                    "state"
                ]
                == "completed"
            ),
            20,
            "the session completed",
        )
        rows = control_rows(bay)
        assert any("via='fleet alice@central role=OPERATOR" in r and "'confirm'" in r for r in rows)
        assert any("refused: wrong role" in r for r in rows)
        assert st["ok"]
    finally:
        err = bay.stop()
        mosq.stop()
    _, executed = sim_counts(err)
    assert executed.get("SET_OUTPUT") == 1, executed  # once, though confirmed twice


def test_bad_requests_are_refused_with_a_reason_and_the_uplink_keeps_running(
    tmp_path: Path,
) -> None:
    mosq = Mosquitto(tmp_path)
    url = f"mqtt://127.0.0.1:{mosq.port}"
    bay = setup_bay(tmp_path, url)
    answers: list[dict] = []
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="bad-input")
    c.on_message = lambda cl, u, m: answers.append(json.loads(m.payload))
    c.connect("127.0.0.1", mosq.port, 10)
    c.loop_start()
    try:
        ready(url)
        c.subscribe("goosectl/v1/s1/b1/cmd/resp/#", qos=1)
        time.sleep(0.5)
        bad = [
            b"{not json",
            b"[1, 2]",
            json.dumps({"schema": 1, "corr": "x1", "op": "run", "role": "OPERATOR",
                        "identity": "a", "procedure": "nope"}).encode(),
            json.dumps({"schema": 1, "corr": "x2", "op": "reboot", "role": "OPERATOR",
                        "identity": "a"}).encode(),
            json.dumps({"schema": 1, "corr": "x3", "op": "run", "role": "ROOT",
                        "identity": "a", "procedure": "pulse"}).encode(),
            b"{" + b" " * 20000 + b"}",
        ]  # fmt: skip
        for payload in bad:
            c.publish(topics.topic("s1", "b1", "cmd/req"), payload, qos=1)
        wait_until(lambda: len(answers) >= len(bad), 30, "every bad request answered")
        answers = answers[: len(bad)]
        for a in answers:
            jsonschema.validate(a, schema("cmd-resp"))
        errors = [a.get("error", "") for a in answers]
        assert all(not a["ok"] for a in answers), answers
        for why in ("malformed: not JSON", "malformed: a payload", "unknown op",
                    "unknown role", "oversized"):  # fmt: skip
            assert any(e.startswith(why) for e in errors), (why, errors)
        assert any("nope" in e for e in errors)  # the controller's own refusal
        assert _try(url)  # still serving
    finally:
        stop_loop(c)
        err = bay.stop()
        mosq.stop()
    _, executed = sim_counts(err)
    assert "SET_OUTPUT" not in executed


def test_a_broker_cut_while_a_step_waits_ends_in_the_timeout_with_nothing_operated(
    tmp_path: Path,
) -> None:
    mosq = Mosquitto(tmp_path)
    url = f"mqtt://127.0.0.1:{mosq.port}"
    bay = setup_bay(tmp_path, url, confirm_timeout_s=4)
    try:
        ready(url)
        started = ask(url, {"op": "run", "role": "OPERATOR", "procedure": "pulse",
                            "params": {"bay": "1"}})  # fmt: skip
        sid = started["reply"]["session"]
        mosq.stop()  # the link is cut: the confirmation cannot come
        final = wait_until(
            lambda: (
                (s := request(bay.sock, {"op": "status", "session": sid})["status"])["state"]
                in ("aborted", "completed")
                and s
            ),
            30,
            "the session ended",
        )
        assert final["state"] == "aborted", final
    finally:
        err = bay.stop()
    _, executed = sim_counts(err)
    assert "SET_OUTPUT" not in executed
