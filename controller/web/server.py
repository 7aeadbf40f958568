"""The HTTP side: the standard library's ThreadingHTTPServer, one thread per connection.

Why no framework: the page has five endpoints, one of them a Server-Sent Events stream
that is a loop writing lines; the standard library does that in a few dozen lines, adds no
dependency to a controller that runs in substations, and Debian ships it. One thread per
open page is cheap at the handful of engineers who look at one bay.

Endpoints: `GET /` (the page), `/static/*` (its CSS and ES module, package data),
`GET /api/state` (exactly `goosectl status --json`), `GET /api/me` (role and CSRF token),
`GET /events` (the stream: `journal` events with the row's seq as id, `state` snapshots,
`heartbeat`), `GET /api/histogram.svg`, `POST /login`, `POST /api/sessions/ID/ACTION`.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import ssl
import threading
import time
import urllib.parse
from collections import OrderedDict
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any

from goosectl.controller import __version__
from goosectl.controller.web.auth import Identity, Sessions, csrf_ok
from goosectl.controller.web.fleet import FleetHub, FleetJournal
from goosectl.controller.web.hub import Hub, Poller
from goosectl.controller.web.source import Controller, JournalReader

#: journal rows a page gets when it first connects (newest), and keeps
BACKLOG = 1000
#: a heartbeat at least this often, so a page notices a dead stream within its watchdog
HEARTBEAT_S = 2.0
#: how often an open stream looks for new journal rows: at most four batches a second, as
#: often as a person can follow a table that changes
JOURNAL_POLL_S = 0.25
#: open event streams at most (each holds a thread and a journal connection)
MAX_STREAMS = 32
MAX_BODY = 4096
DONE_KEPT = 4096
COOKIE = "goosectl_web"
_SESSION_ID = re.compile(r"^s[0-9]{1,9}$")
_STEP = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
ACTIONS = ("confirm", "abort")
STATIC = {
    "app.js": "text/javascript; charset=utf-8",
    "fleet.js": "text/javascript; charset=utf-8",
    "live.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
HTML = "text/html; charset=utf-8"
READ_ONLY_FLEET = (
    "the fleet's pages are read-only: remote procedures go through the fleet "
    "(`goosectl fleet confirm`)"
)
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _static(name: str) -> bytes:
    return resources.files("goosectl.controller.web").joinpath("static", name).read_bytes()


class Actions:
    """Confirm and abort, each operated at most once per (session, step, action): a double
    click, a retried POST or a second tab gets the first answer back, and the controller
    itself refuses a step that is no longer the session's (the request names the step)."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        #: answers by (session, step, action), the newest DONE_KEPT (a session's step is
        #: also refused by the controller once it moved on, so forgetting old ones is safe)
        self.done: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self.lock = threading.Lock()

    def act(self, who: Identity, sid: str, step: str, action: str) -> dict[str, Any]:
        key = (sid, step, action)
        with self.lock:  # one at a time: the second click waits for the first's answer
            if key in self.done:
                return {**self.done[key], "repeat": True}
            reply = self.controller.ask(
                {"op": action, "session": sid, "step": step, "via": who.label()}
            )
            if not reply.get("unreachable"):
                self.done[key] = reply
                while len(self.done) > DONE_KEPT:
                    self.done.popitem(last=False)
            return reply


class WebServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        bind: tuple[str, int],
        controller: Controller,
        journal: Path | None,
        sessions: Sessions,
        tls: ssl.SSLContext | None = None,
        poll_s: float = 1.0,
        fleet: Path | None = None,
    ) -> None:
        """`fleet`: the collector's store; the server then serves the fleet page and a
        read-only bay page per bay in it, and neither the control socket nor `journal`."""
        self.address_family = socket.AF_INET6 if ":" in bind[0] else socket.AF_INET
        super().__init__(bind, Handler)
        self.controller = controller
        self.journal_path = journal
        self.sessions = sessions
        self.tls = tls
        self.loopback = is_loopback(bind[0])
        self.fleet = fleet
        self.hub: Poller = (
            FleetHub(fleet, poll_s)
            if fleet is not None
            else Hub(controller, JournalReader(journal), poll_s)
        )
        self.actions = Actions(controller)
        self.streams = 0
        self.streams_lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self) -> str:
        host = str(self.server_address[0])
        shown = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{shown}:{self.port}/"

    def serve(self) -> None:
        self.hub.start()
        try:
            self.serve_forever(poll_interval=0.2)
        finally:
            self.hub.stop()

    def shutdown(self) -> None:
        self.hub.stop()
        super().shutdown()


class Handler(BaseHTTPRequestHandler):
    server: WebServer
    protocol_version = "HTTP/1.1"
    server_version = f"goosectl-web/{__version__}"
    sys_version = ""
    #: a client silent this long is closed (an event stream writes every HEARTBEAT_S)
    timeout = 30

    def setup(self) -> None:
        """TLS is negotiated here, in the connection's own thread: a slow or broken
        handshake holds that thread only, never the accepting one."""
        tls = self.server.tls
        if tls is not None:
            self.request.settimeout(10)
            self.request = tls.wrap_socket(self.request, server_side=True)
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # access lines are noise beside a controller; errors are answered, not logged

    # -- helpers ---------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "same-origin")  # no-referrer makes Origin "null"
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        body = json.dumps(obj, indent=2, default=str).encode()
        self._send(status, body, "application/json")

    def _error(self, status: int, why: str) -> None:
        self._json(status, {"ok": False, "error": why})

    def _host_ok(self) -> bool:
        """On loopback, only a loopback Host: a page elsewhere that got its name resolved
        to 127.0.0.1 (DNS rebinding) cannot read the bay."""
        if not self.server.loopback:
            return True
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0] if self.headers else ""
        return is_loopback(host)

    def _origin_ok(self) -> bool:
        origin = self.headers.get("Origin")
        if origin is None:
            return False
        scheme = "https" if self.server.tls else "http"
        return origin == f"{scheme}://{self.headers.get('Host', '')}"

    def _cookie(self) -> str | None:
        raw = self.headers.get("Cookie")
        if not raw:
            return None
        try:
            c = SimpleCookie(raw)
        except CookieError:
            return None
        m = c.get(COOKIE)
        return m.value if m is not None else None

    def _identity(self) -> tuple[Identity | None, bool]:
        """(who, signed in by a bearer token). Without a token file, everybody is the
        read-only anonymous viewer."""
        sessions = self.server.sessions
        if not sessions.required:
            return sessions.anonymous, False
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return sessions.by_token(auth[7:].strip()), True
        return sessions.by_cookie(self._cookie()), False

    # -- methods ---------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError, TimeoutError, ssl.SSLError):
            self.close_connection = True

    def do_POST(self) -> None:
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError, TimeoutError, ssl.SSLError):
            self.close_connection = True

    def _get(self) -> None:
        if not self._host_ok():
            self._error(HTTPStatus.MISDIRECTED_REQUEST, "this page answers on its loopback name")
            return
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            if name not in STATIC:
                self._error(HTTPStatus.NOT_FOUND, f"no such file: {name}")
                return
            self._send(HTTPStatus.OK, _static(name), STATIC[name])
            return
        who, _ = self._identity()
        if who is None:
            if path in ("/", "/login") or path.startswith("/bay/"):
                self._send(HTTPStatus.OK, _static("login.html"), "text/html; charset=utf-8")
            else:
                self._error(HTTPStatus.UNAUTHORIZED, "sign in first (POST /login with a token)")
            return
        query = urllib.parse.parse_qs(url.query)
        if self.server.fleet is not None and self._fleet_get(path, query):
            return
        if path == "/":
            self._send(HTTPStatus.OK, _static("index.html"), HTML)
        elif path == "/api/state":
            reply = self.server.controller.ask({"op": "controller"})
            self._json(HTTPStatus.OK if reply.get("ok") else HTTPStatus.BAD_GATEWAY, reply)
        elif path == "/api/me":
            acts = who.operator and self.server.fleet is None
            self._json(
                HTTPStatus.OK,
                {"name": who.name, "role": who.role, "csrf": who.csrf, "actions": acts},
            )
        elif path == "/api/histogram.svg":
            svg = self.server.hub.svg
            if svg is None:
                self._error(HTTPStatus.NOT_FOUND, "no trip measured yet")
            else:
                self._send(HTTPStatus.OK, svg.encode(), "image/svg+xml")
        elif path == "/events":
            self._events(query)
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no such page: {path}")

    def _fleet_get(self, path: str, query: dict[str, list[str]]) -> bool:
        """The fleet's own pages; False for what is served as for one bay (/api/me)."""
        hub = self.server.hub
        if path == "/":
            self._send(HTTPStatus.OK, _static("fleet.html"), HTML)
        elif path.startswith("/bay/"):
            key = self._bay_key(path.removeprefix("/bay/"))
            if key is None:
                self._error(HTTPStatus.NOT_FOUND, "a bay page is /bay/SITE/BAY")
            else:
                self._send(HTTPStatus.OK, _static("index.html"), HTML)
        elif path == "/api/fleet":
            self._json(HTTPStatus.OK, hub.payload)
        elif path == "/api/state":
            key = self._bay_key((query.get("bay") or [""])[0], quoted=False)
            state = hub.payload_of(key)["controller"] if key else None
            if state is None:
                self._error(HTTPStatus.BAD_REQUEST, "which bay? /api/state?bay=SITE/BAY")
            else:
                self._json(HTTPStatus.OK if state.get("ok") else HTTPStatus.NOT_FOUND, state)
        elif path == "/api/histogram.svg":
            self._error(HTTPStatus.NOT_FOUND, "the fleet store carries no latencies")
        else:
            return False
        return True

    @staticmethod
    def _bay_key(text: str, quoted: bool = True) -> str | None:
        """SITE/BAY from a path or a query (percent-decoded), or None."""
        parts = text.split("/")
        if quoted:
            parts = [urllib.parse.unquote(x) for x in parts]
        if len(parts) != 2 or not all(parts):
            return None
        return f"{parts[0]}/{parts[1]}"

    def _body(self) -> bytes | None:
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "Content-Length is not a number")
            return None
        if n < 0 or n > MAX_BODY:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a body of at most {MAX_BODY} bytes")
            return None
        return self.rfile.read(n)

    def _post(self) -> None:
        if not self._host_ok():
            self._error(HTTPStatus.MISDIRECTED_REQUEST, "this page answers on its loopback name")
            return
        path = urllib.parse.urlsplit(self.path).path
        body = self._body()
        if body is None:
            return
        if path == "/login":
            self._login(body)
            return
        m = re.fullmatch(r"/api/sessions/([^/]+)/([^/]+)", path)
        if m is None:
            self._error(HTTPStatus.NOT_FOUND, f"no such action: {path}")
            return
        who, bearer = self._identity()
        if who is None:
            self._error(HTTPStatus.UNAUTHORIZED, "sign in first")
            return
        if not bearer:  # a browser: the request must come from this page
            if not self._origin_ok():
                self._error(HTTPStatus.FORBIDDEN, "refused: the request's Origin is not this page")
                return
            if not csrf_ok(who, self.headers.get("X-CSRF-Token")):
                self._error(HTTPStatus.FORBIDDEN, "refused: missing or wrong CSRF token")
                return
        if not who.operator:
            self._error(
                HTTPStatus.FORBIDDEN, f"refused: {who.name} is a {who.role}, not an OPERATOR"
            )
            return
        if self.server.fleet is not None:
            self._error(HTTPStatus.FORBIDDEN, f"refused: {READ_ONLY_FLEET}")
            return
        sid, action = m.group(1), m.group(2)
        if action not in ACTIONS or not _SESSION_ID.match(sid):
            self._error(HTTPStatus.NOT_FOUND, f"no such action: {path}")
            return
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, 'the body must be JSON: {"step": "NAME"}')
            return
        step = req.get("step") if isinstance(req, dict) else None
        if not isinstance(step, str) or not _STEP.match(step):
            self._error(HTTPStatus.BAD_REQUEST, 'the body must name the step: {"step": "NAME"}')
            return
        reply = self.server.actions.act(who, sid, step, action)
        code = HTTPStatus.OK if reply.get("ok") else HTTPStatus.CONFLICT
        if reply.get("unreachable"):
            code = HTTPStatus.BAD_GATEWAY
        self._json(code, reply)

    def _login(self, body: bytes) -> None:
        if not self.server.sessions.required:
            self._send(HTTPStatus.SEE_OTHER, b"", headers={"Location": "/"})
            return
        if not self._origin_ok():
            self._error(HTTPStatus.FORBIDDEN, "refused: the request's Origin is not this page")
            return
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0]
        signed = self.server.sessions.sign_in(token)
        if signed is None:
            time.sleep(0.5)  # guessing costs time
            self._error(HTTPStatus.UNAUTHORIZED, "unknown token")
            return
        cookie, _ = signed
        flags = "HttpOnly; SameSite=Strict; Path=/" + ("; Secure" if self.server.tls else "")
        self._send(
            HTTPStatus.SEE_OTHER,
            b"",
            headers={"Location": "/", "Set-Cookie": f"{COOKIE}={cookie}; {flags}"},
        )

    # -- the event stream ------------------------------------------------------------------

    def _events(self, query: dict[str, list[str]]) -> None:
        """Journal rows after the client's last one (Last-Event-ID, or `?after=` for a
        page that opened a new EventSource itself), then every new one, with the latest
        snapshot whenever it changes and a heartbeat."""
        raw = self.headers.get("Last-Event-ID") or (query.get("after") or [""])[0]
        after: int | None = None
        if raw:
            try:
                after = int(str(raw))
            except ValueError:
                self._error(
                    HTTPStatus.BAD_REQUEST, f"Last-Event-ID is not a sequence number: {raw!r}"
                )
                return
        srv = self.server
        with srv.streams_lock:
            if srv.streams >= MAX_STREAMS:
                self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"{MAX_STREAMS} pages are open already")
                return
            srv.streams += 1
        key: str | None = None
        reader: JournalReader | FleetJournal | _NoRows
        if srv.fleet is not None:
            key = self._bay_key((query.get("bay") or [""])[0], quoted=False)
            reader = _NoRows() if key is None else FleetJournal(srv.fleet, key)
        else:
            reader = JournalReader(srv.journal_path)
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.close_connection = True
            self._stream(reader, after, key)
        finally:
            reader.close()
            with srv.streams_lock:
                srv.streams -= 1

    def _write(self, text: str) -> None:
        self.wfile.write(text.encode())
        self.wfile.flush()

    def _stream(
        self, reader: JournalReader | FleetJournal | _NoRows, after: int | None, key: str | None
    ) -> None:
        """New journal rows as one event per batch, read at most every JOURNAL_POLL_S once
        the backlog is sent (a busy bay journals hundreds of rows a second: a page that
        took each as an event of its own spent its CPU on events, not on what a person
        sees), the snapshot whenever the poller has a new one, and a heartbeat."""
        hub = self.server.hub
        self._write("retry: 1000\n\n")
        rows = reader.after(after, BACKLOG) if after is not None else reader.last(BACKLOG)
        last = after or 0
        seen = -1
        beat = time.monotonic()
        due = beat + JOURNAL_POLL_S  # when the journal is read next
        while not hub.stopped:
            while rows:  # a backlog goes out at once, a batch of BACKLOG rows an event
                last = rows[-1]["seq"]
                self._write(f"id: {last}\nevent: journal\ndata: {json.dumps(rows)}\n\n")
                beat = time.monotonic()
                rows = reader.after(last, BACKLOG) if len(rows) == BACKLOG else []
            if hub.version != seen:
                seen = hub.version
                payload = json.dumps(hub.payload_of(key), default=str)
                self._write(f"event: state\ndata: {payload}\n\n")
                beat = time.monotonic()
            if time.monotonic() - beat >= HEARTBEAT_S:
                self._write(f"event: heartbeat\ndata: {json.dumps({'last': last})}\n\n")
                beat = time.monotonic()
            with hub.cond:
                if hub.version == seen:
                    hub.cond.wait(max(0.0, due - time.monotonic()))
            if time.monotonic() >= due:
                rows = reader.after(last, BACKLOG)
                due = time.monotonic() + JOURNAL_POLL_S


class _NoRows:
    """The fleet page's stream: snapshots and heartbeats, no journal."""

    def after(self, seq: int, limit: int = 1000) -> list[dict[str, Any]]:
        return []

    def last(self, limit: int) -> list[dict[str, Any]]:
        return []

    def close(self) -> None:
        pass


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert, key)
    return ctx


__all__ = ["WebServer", "is_loopback", "tls_context"]
