"""Remote procedures: `cmd/req` in, the controller's own agent layer, `cmd/resp/{corr}` out.

The uplink relays a request to the controller's control socket, the same door `goosectl
agent` uses, so a remote procedure runs the same procedure files through the same
confirmation gate, and the controller journals it as a control request whose detail names
the remote identity (`via=...`). Before anything reaches the controller:

- the request must parse: at most `max_bytes`, JSON, this layout's schema, a correlation id
  that can be a topic segment, a known op and role (IEC 62351-8 names);
- the role must allow the op: VIEWER may read (`status`), OPERATOR may also `run`,
  `confirm` and `abort`;
- a `confirm` or `abort` names the session and the step it is meant for, and is relayed
  only while the session waits on that very step;
- each request is done at most once: `run` per correlation id, `confirm`/`abort` per
  (session, step). A broker that delivers a message twice (QoS 1 is at least once) gets
  the first answer again, marked `duplicate`, and nothing is relayed. The record is kept
  in the uplink's state folder, so a restarted uplink still knows.

A refusal is answered with its reason, counted, and journaled in the controller too
(relayed as a request the controller refuses, carrying the reason in `via`), and nothing
is operated. A link lost while a step waits for confirmation needs nothing here: the
confirmation never comes, and the agent's own `confirm_timeout_s` ends the session.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

from goosectl.controller.fleet import topics
from goosectl.controller.fleet.mqtt import stop_loop
from goosectl.controller.shell.control import ControlUnavailable, request

ROLES = {"VIEWER": {"status"}, "OPERATOR": {"status", "run", "confirm", "abort"}}
OPS = ("status", "run", "confirm", "abort")
_CORR = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RECORD = "uplink-commands.json"
KEEP = 1000


class Refused(Exception):
    """A request not relayed: the reason goes back in cmd/resp (to its corr, once known)."""

    def __init__(self, why: str, corr: str | None = None) -> None:
        super().__init__(why)
        self.corr = corr


class RemoteCommands:
    def __init__(self, control: Path | None, state_dir: Path, max_bytes: int) -> None:
        self.control = control
        self.path = state_dir / RECORD
        self.max_bytes = max_bytes
        self.refused: Counter[str] = Counter()
        self.done: OrderedDict[str, dict[str, Any]] = OrderedDict()
        with contextlib.suppress(OSError, ValueError, TypeError):
            self.done.update(json.loads(self.path.read_text()))

    def handle(self, payload: bytes, controller: str) -> tuple[str | None, dict[str, Any]]:
        """(correlation id or None when it has none usable, the response)."""
        corr: str | None = None
        try:
            req = self._parse(payload)
            corr = req["corr"]
            return corr, self._do(req, controller)
        except Refused as exc:
            why, corr = str(exc), corr or exc.corr
            self.refused[why.split(":")[0]] += 1
            self._journal_refusal(corr, why)
            return corr, self._resp(corr, controller, False, error=why)

    def _parse(self, payload: bytes) -> dict[str, Any]:
        if len(payload) > self.max_bytes:
            raise Refused(f"oversized: {len(payload)} bytes, at most {self.max_bytes}")
        try:
            req = topics.decode(payload, self.max_bytes)
        except topics.PayloadError as exc:
            raise Refused(f"malformed: {exc}") from exc
        corr = req.get("corr")
        if not isinstance(corr, str) or not _CORR.match(corr):
            raise Refused("malformed: corr must be 1-64 letters, digits, `_` or `-`")
        try:
            self._check(req)
        except Refused as exc:
            exc.corr = corr
            raise
        return req

    def _check(self, req: dict[str, Any]) -> None:
        op, role = req.get("op"), req.get("role")
        if op not in OPS:
            raise Refused(f"unknown op: {op!r} (one of {', '.join(OPS)})")
        if role not in ROLES:
            raise Refused(f"unknown role: {role!r} (one of {', '.join(ROLES)})")
        if op not in ROLES[role]:
            raise Refused(f"wrong role: {role} may not {op}")
        if not isinstance(req.get("identity"), str) or not req["identity"]:
            raise Refused("malformed: identity (who asks) is required")
        if op == "run" and not isinstance(req.get("procedure"), str):
            raise Refused("malformed: run needs a procedure")
        if op in ("confirm", "abort") and not (
            isinstance(req.get("session"), str) and isinstance(req.get("step"), str)
        ):
            raise Refused(f"malformed: {op} needs a session and a step")
        params = req.get("params", {})
        if not isinstance(params, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in params.items()
        ):
            raise Refused("malformed: params is an object of strings")

    def _via(self, req: dict[str, Any]) -> str:
        return f"fleet {req['identity']} role={req['role']} corr={req['corr']}"

    def _do(self, req: dict[str, Any], controller: str) -> dict[str, Any]:
        op, corr = req["op"], req["corr"]
        key = {
            "run": f"run {corr}",
            "confirm": f"confirm {req.get('session')} {req.get('step')}",
            "abort": f"abort {req.get('session')} {req.get('step')}",
        }.get(op)
        if key is not None and key in self.done:
            return {**self.done[key], "corr": corr, "duplicate": True}
        via = self._via(req)
        if op == "status":
            reply = self._ask({"op": "status", "via": via, **_session(req)})
        elif op == "run":
            reply = self._ask(
                {
                    "op": "run",
                    "procedure": req["procedure"],
                    "params": req.get("params", {}),
                    "via": via,
                }
            )
        else:
            st = self._ask({"op": "status", "session": req["session"], "via": via})
            status = st.get("status") if st.get("ok") else None
            if not isinstance(status, dict):
                raise Refused(f"unknown session: {st.get('error', req['session'])}")
            waits = status.get("state") == "awaiting_confirmation"
            if op == "confirm" and not waits:
                raise Refused(
                    f"wrong step: session {req['session']} is {status.get('state')}, "
                    "not waiting for a confirmation"
                )
            if status.get("step") != req["step"]:
                raise Refused(
                    f"wrong step: session {req['session']} is at {status.get('step')!r}, "
                    f"not {req['step']!r}"
                )
            reply = self._ask({"op": op, "session": req["session"], "via": via})
        resp = self._resp(corr, controller, bool(reply.get("ok")), reply=reply)
        if not reply.get("ok"):
            resp["error"] = str(reply.get("error", "refused by the controller"))
        if key is not None:
            self._remember(key, resp)
        return resp

    def _ask(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.control is None:
            raise Refused("unavailable: no control socket configured")
        try:
            return request(self.control, req, timeout_s=5.0)
        except (ControlUnavailable, OSError, ValueError) as exc:
            raise Refused(f"unavailable: {exc}") from exc

    def _journal_refusal(self, corr: str | None, why: str) -> None:
        """The controller journals the refusal too: a request it refuses, the reason in
        `via` (nothing is operated: `fleet_refused` is no op of the controller's)."""
        if self.control is None:
            return
        with contextlib.suppress(ControlUnavailable, OSError, ValueError):
            request(
                self.control,
                {"op": "fleet_refused", "via": f"fleet corr={corr} refused: {why}"},
                timeout_s=2.0,
            )

    def _remember(self, key: str, resp: dict[str, Any]) -> None:
        self.done[key] = resp
        while len(self.done) > KEEP:
            self.done.popitem(last=False)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(self.done))
        os.replace(tmp, self.path)

    @staticmethod
    def _resp(corr: str | None, controller: str, ok: bool, **more: Any) -> dict[str, Any]:
        return {"schema": topics.SCHEMA, "corr": corr, "controller": controller, "ok": ok, **more}


def _session(req: dict[str, Any]) -> dict[str, Any]:
    return {"session": req["session"]} if isinstance(req.get("session"), str) else {}


def call(
    broker_urls: list[str],
    site: str,
    bay: str,
    req: dict[str, Any],
    *,
    credentials: Path | None = None,
    ca_file: Path | None = None,
    timeout_s: float = 15.0,
) -> dict[str, Any]:
    """The central side: `req` (with a fresh corr) to the bay's cmd/req at QoS 1, and the
    bay's answer from cmd/resp/{corr}; a TimeoutError when none comes in `timeout_s`."""
    import threading
    import uuid

    from goosectl.controller.fleet.mqtt import make_client, parse_broker

    corr = req.get("corr") or uuid.uuid4().hex
    body = {"schema": topics.SCHEMA, **req, "corr": corr}
    got: list[dict[str, Any]] = []
    ready, answered = threading.Event(), threading.Event()
    broker = parse_broker(broker_urls[0])
    client = make_client(
        f"goosectl-fleet-{corr[:16]}", broker, credentials=credentials, ca_file=ca_file
    )

    def on_subscribe(c: Any, u: Any, mid: int, rcs: Any, p: Any) -> None:
        ready.set()

    def on_message(c: Any, u: Any, msg: Any) -> None:
        try:
            got.append(topics.decode(bytes(msg.payload)))
        except topics.PayloadError:
            return
        answered.set()

    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.connect(broker.host, broker.port, keepalive=30)
    client.loop_start()
    try:
        client.subscribe(topics.topic(site, bay, f"cmd/resp/{corr}"), qos=1)
        if not ready.wait(timeout_s):
            raise TimeoutError(f"{broker}: no subscription acknowledged")
        client.publish(topics.topic(site, bay, "cmd/req"), topics.encode(body), qos=1)
        if not answered.wait(timeout_s):
            raise TimeoutError(f"no answer from {site}/{bay} in {timeout_s:g} s (corr {corr})")
        return got[0]
    finally:
        stop_loop(client)
        client.disconnect()
