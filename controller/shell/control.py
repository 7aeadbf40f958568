"""The local control socket: JSON lines over a Unix socket, served by the controller's loop.

`goosectl agent ...`, `goosectl mode` and `goosectl status` connect, send one request per
line, read one reply per line. The server is non-blocking and lives in the controller's
loop as one file descriptor (its own epoll set of the listening socket and the clients,
added with `LiveGoose.add_reader`), so a request is handled between two frames, never
during one, and a few at a time: GOOSE frames and trips go first. Every input is hostile
until parsed; every limit is in `ControlCfg`; where the socket lives and who may connect
is `control_socket`. `controller_ops` answers the controller's own requests (`mode`,
`controller`) and hands the rest to the agent service.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import socket
import stat
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from goosectl.controller.config.control import ControlCfg
from goosectl.controller.shell.control_log import ControlLog
from goosectl.controller.shell.control_socket import (
    Peer,
    claim,
    default_path,
    group_id,
    peer_of,
    refusal,
    runtime_dir,
)

__all__ = [
    "ControlDenied",
    "ControlServer",
    "ControlUnavailable",
    "controller_ops",
    "default_path",
    "request",
]

Handler = Callable[[dict[str, Any], int], dict[str, Any]]


def controller_ops(
    bay: Any, fallback: Handler, extra: Callable[[], dict[str, Any]] | None = None
) -> Handler:
    """The control socket's handler: `{"op": "mode"}` reads or sets the behaviour mode
    (`mode`: on, test, test-blocked, off) and simulation mode (`simulation`: bool), each
    change journaled; `{"op": "controller"}` is `goosectl status` (modes, bay, inputs,
    LGOS of every subscription; `extra` adds what the shell measures, e.g. the last trip
    latencies). Anything else goes to `fallback` (the agent service)."""

    def handle(req: dict[str, Any], now_ns: int) -> dict[str, Any]:
        op = req.get("op")
        if op == "mode":
            changed = []
            try:
                mode, sim = req.get("mode"), req.get("simulation")
                if mode is not None and bay.set_mode(str(mode), now_ns, "control socket"):
                    changed.append("mode")
                if sim is not None and bay.set_simulation(bool(sim), now_ns, "control socket"):
                    changed.append("simulation")
            except ValueError as exc:
                return {"ok": False, "error": str(exc)}
            return {
                "ok": True,
                "mode": bay.mode_name,
                "simulation": bay.simulation,
                "changed": changed,
            }
        if op == "controller":
            return {"ok": True, **bay.status(now_ns), **(extra() if extra else {})}
        return fallback(req, now_ns)

    return handle


class ControlUnavailable(Exception):
    """Nothing is listening on the control socket."""


class ControlDenied(ControlUnavailable):
    """A controller is there, but this user may not reach its socket."""


class ControlFailed(ControlDenied):
    """Something answered on the socket, but not as a controller does (no answer in time,
    an answer that is not JSON)."""


#: Strings (with their escapes) go first; then brackets only, all of one kind.
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def too_deep(line: bytes, limit: int) -> bool:
    """True if the JSON in `line` nests deeper than `limit`, or its brackets do not pair up.

    Checked before parsing, in passes at C speed: a 1,000-byte `[[[[...` must never reach
    the parser, which recurses once per level. Each pass removes the innermost pairs, one
    level; whether a `[` closes with `}` is the parser's business afterwards."""
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    brackets = _STRINGS.sub(b"", line).translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        inner = brackets.replace(b"[]", b"")
        if not inner:
            return False
        if len(inner) == len(brackets):
            return True  # nothing pairs up: unbalanced
        brackets = inner
    return True


class Client:
    """One connection: its peer, what it sent and was not yet served, what it was sent
    and did not yet take."""

    __slots__ = ("eof", "events", "fd", "inbuf", "last_ns", "out", "peer", "sock", "stalled_ns")

    def __init__(self, sock: socket.socket, peer: Peer, now_ns: int) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.inbuf = bytearray()
        self.out = bytearray()
        self.last_ns = now_ns
        #: since when replies wait in `out` (None: nothing waits)
        self.stalled_ns: int | None = None
        self.eof = False
        self.events = select.EPOLLIN

    def has_line(self) -> bool:
        return b"\n" in self.inbuf


class ControlServer:
    """The control socket's server, on its own epoll set: one fd in the controller's loop.

    Limits (`ControlCfg`), each counted, alarmed and journaled through `ControlLog`:
    at most `max_clients` connections (a peer that is not allowed is refused before that);
    a request line of at most `max_line_bytes`, nested at most `max_depth` deep; replies
    written without ever blocking, at most `max_output_bytes` queued per client, and a
    client that has not taken its replies within `write_timeout_s` is dropped (while
    replies wait, its next requests wait too); a client silent for `idle_timeout_s` is
    closed; out of file descriptors, a connection is refused, not the controller killed.
    Requests are served `requests_per_round` (and `round_budget_ms`) at a time, then the
    loop goes back to the network: a flood of requests delays requests, not trips.
    """

    def __init__(
        self,
        path: Path,
        handler: Handler | None,
        clock: Callable[[], int] = time.monotonic_ns,
        cfg: ControlCfg | None = None,
        log: ControlLog | None = None,
    ) -> None:
        """`handler` may come later (`goosectl run` takes the socket before it builds the
        controller, so a second controller is refused before it opens anything)."""
        self.cfg = cfg or ControlCfg()
        self.path = Path(path)
        self.handler = handler
        #: the time requests are handled at (virtual in the demo); limits use the monotonic
        self.clock = clock
        #: requests and limits: counted, alarmed, journaled (a journal-less one until the
        #: controller gives it its journal)
        self.log = log or ControlLog(None, time.monotonic_ns())
        self.gid = group_id(self.cfg.group)
        self.supervisors = group_id(self.cfg.supervisor_group)
        #: who started each session (its uid): only they, or a supervisor, confirm it
        self.owners: dict[str, int] = {}
        self.sock, self._lock = claim(self.path, self.gid, backlog=128)
        self._inode = os.stat(self.path).st_ino
        self.ep = select.epoll()
        self.ep.register(self.sock.fileno(), select.EPOLLIN)
        self.wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.ep.register(self.wake, select.EPOLLIN)
        self._spare: int | None = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        self._accept_paused_until: int | None = None
        self.clients: dict[int, Client] = {}
        self.ready: deque[Client] = deque()
        #: connections: accepted, rejected (peer, cap, no fds), closed, accept errors
        self.counts: Counter[str] = Counter()
        self._remove: Callable[[int], None] | None = None
        self._next_tick = 0

    def attach(self, add_reader, remove_reader) -> None:
        """Serve from a selectors loop (`LiveGoose.add_reader` / `remove_reader`); call
        `tick` every round too (`LiveGoose.on_round`) so timeouts fire on a quiet socket."""
        self._remove = remove_reader
        add_reader(self.ep.fileno(), self._on_ready)

    # -- events ---------------------------------------------------------------------------

    def _on_ready(self) -> None:
        """One round: connections, reads and writes, then requests, within
        `round_budget_ms` (at least one of each that waits); what is left stays ready
        (level-triggered) for the next round, after the network has had its turn."""
        t = time.monotonic_ns()
        end = t + int(self.cfg.round_budget_ms * 1_000_000)
        listen = self.sock.fileno()
        for fd, ev in self.ep.poll(0):
            if time.monotonic_ns() >= end:
                break
            if fd == listen:
                self._accept(t, end)
            elif fd == self.wake:
                with contextlib.suppress(BlockingIOError):
                    os.eventfd_read(self.wake)
            else:
                c = self.clients.get(fd)
                if c is None:
                    continue
                if ev & select.EPOLLOUT:
                    self._flush(c, t)
                if ev & (select.EPOLLIN | select.EPOLLHUP | select.EPOLLERR) and fd in self.clients:
                    self._read(c, t, hangup=bool(ev & (select.EPOLLHUP | select.EPOLLERR)))
        self._serve(t, end)
        self.tick(t)

    def _limit(self, name: str, detail: str) -> None:
        self.log.crossed(name, detail, time.monotonic_ns())

    def _accept(self, t: int, end: int) -> None:
        for _ in range(64):  # then back to the loop; the backlog waits for the next round
            if time.monotonic_ns() >= end:
                return
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._no_fds(t, exc)
                    return
                self.counts["accept_errors"] += 1  # ECONNABORTED and the like: next one
                continue
            self._admit(conn, t)

    def _no_fds(self, t: int, exc: OSError) -> None:
        """Out of file descriptors: refuse the waiting connection with the one kept spare,
        so it does not stay in the backlog waking the loop; pause accepting if even that
        fails. The controller never dies of it."""
        self._limit("control.fds", f"accept: {exc.strerror}; connection refused")
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
            try:
                conn, _ = self.sock.accept()
            except OSError:
                conn = None
            if conn is not None:
                self._reject(conn, "the controller is out of file descriptors; try later")
            with contextlib.suppress(OSError):
                self._spare = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
            if conn is not None:
                return
        self.ep.modify(self.sock.fileno(), 0)
        self._accept_paused_until = t + 100_000_000

    def _admit(self, conn: socket.socket, t: int) -> None:
        conn.setblocking(False)
        try:
            peer = peer_of(conn)
        except OSError:
            conn.close()
            return
        why = refusal(peer, self.gid)
        if why is not None:
            self._limit("control.peer", f"{peer}: {why}")
            self._reject(conn, f"permission denied: {why}")
            return
        if len(self.clients) >= self.cfg.max_clients:
            self._sweep(t)
        if len(self.clients) >= self.cfg.max_clients:
            self._limit(
                "control.clients",
                f"{len(self.clients)} clients connected (control.max_clients): refused {peer}",
            )
            self._reject(
                conn, f"too many control clients ({self.cfg.max_clients}, control.max_clients)"
            )
            return
        c = Client(conn, peer, t)
        self.clients[c.fd] = c
        self.ep.register(c.fd, select.EPOLLIN)
        self.counts["accepted"] += 1

    def _reject(self, conn: socket.socket, error: str) -> None:
        with contextlib.suppress(OSError):
            conn.send(_line({"ok": False, "error": error}))
        conn.close()
        self.counts["rejected"] += 1

    def _read(self, c: Client, t: int, hangup: bool = False) -> None:
        data = b""
        if not c.eof:
            try:
                data = c.sock.recv(65536)
            except BlockingIOError:
                if not hangup:
                    return
            except OSError:
                pass
            if not data:
                c.eof = True  # requests already sent are still answered (half-close)
        if data:
            if b"\n" in data:
                # only a whole request counts as activity: a client that trickles bytes
                # (slow-loris) is as idle as a silent one
                c.last_ns = t
            c.inbuf += data
        self._settle(c)

    def _settle(self, c: Client) -> None:
        """What a client waits for next: more bytes (unless it has plenty buffered, or
        said it is done), room for its replies, its turn, or nothing (closed)."""
        if c.fd not in self.clients:
            return
        self._want(c, read=not c.eof and len(c.inbuf) <= 2 * self.cfg.max_line_bytes)
        if c.out:
            return  # `_flush` settles it again once the replies are taken
        if self._too_long(c):
            return
        if c.has_line():
            self._queue(c)
        elif c.eof:
            self._drop(c)

    def _too_long(self, c: Client) -> bool:
        """The client's next line, complete or not, is over the cap: refused, and the
        client closed (where the next request would start cannot be known)."""
        nl = c.inbuf.find(b"\n")
        if (nl if nl >= 0 else len(c.inbuf)) <= self.cfg.max_line_bytes:
            return False
        self._limit(
            "control.line",
            f"{c.peer}: a request line longer than {self.cfg.max_line_bytes} bytes",
        )
        self._answer_and_close(
            c,
            f"request line longer than {self.cfg.max_line_bytes} bytes "
            "(control.max_line_bytes): closing the connection",
        )
        return True

    def _answer_and_close(self, c: Client, error: str) -> None:
        c.inbuf.clear()
        c.eof = True
        self._reply(c, {"ok": False, "error": error}, time.monotonic_ns())
        if c.fd in self.clients and not c.out:
            self._drop(c)

    # -- serving --------------------------------------------------------------------------

    def _queue(self, c: Client) -> None:
        if c not in self.ready:
            self.ready.append(c)
            os.eventfd_write(self.wake, 1)

    def _serve(self, t: int, end: int) -> None:
        """At most `requests_per_round` requests, and no new one after `end` (one at
        least), round-robin over the clients; the rest wait for the next round."""
        cfg = self.cfg
        served = 0
        while self.ready and served < cfg.requests_per_round:
            c = self.ready.popleft()
            if c.fd not in self.clients or c.out:
                continue  # gone, or not taking its replies: `_flush` queues it again
            nl = c.inbuf.find(b"\n")
            if nl < 0:
                continue
            line = bytes(c.inbuf[:nl])
            del c.inbuf[: nl + 1]  # cheap from the front of a bytearray
            self._reply(c, self.answer(line, c.peer), t)
            served += 1
            self._settle(c)
            if time.monotonic_ns() >= end:
                break
        waiting = sum(1 for c in self.ready if not c.out)
        if waiting:
            self._limit(
                "control.backlog",
                f"{served} requests served this round (control.requests_per_round, "
                f"round_budget_ms); {waiting} clients wait for the next",
            )
            os.eventfd_write(self.wake, 1)  # come back right after the network

    def answer(self, line: bytes, peer: Peer | None = None) -> dict[str, Any]:
        """The reply to one request line; never raises (a handler's exception is a reply)."""
        now = self.clock()
        req, op = None, None
        if too_deep(line, self.cfg.max_depth):
            self._limit("control.depth", f"{peer}: JSON nested deeper than {self.cfg.max_depth}")
            reply = {
                "ok": False,
                "error": f"bad request: JSON nested deeper than {self.cfg.max_depth} levels "
                "(control.max_depth)",
            }
        else:
            try:
                req = json.loads(line)
            except (ValueError, RecursionError) as exc:
                reply = {"ok": False, "error": f"bad request: not JSON: {exc}"}
            else:
                op = req.get("op") if isinstance(req, dict) else None
                if not isinstance(op, str):
                    op = None
                    reply = {
                        "ok": False,
                        "error": 'bad request: a request is a JSON object with an "op" '
                        'string, e.g. {"op": "list"}',
                    }
                elif self.handler is None:
                    reply = {"ok": False, "error": "the controller is starting"}
                elif op == "confirm" and (why := self._not_owner(req, peer)) is not None:
                    reply = {"ok": False, "error": f"permission denied: {why}"}
                else:
                    try:
                        reply = self.handler(req, now)
                    except Exception as exc:
                        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                    if not isinstance(reply, dict):
                        reply = {"ok": False, "error": "the controller gave no reply"}
                    sid = reply.get("session")
                    if op == "run" and peer is not None and isinstance(sid, str):
                        self.owners[sid] = peer.uid
        limit = reply.get("limit")
        if isinstance(limit, str):
            self._limit(limit, f"{peer}: {reply.get('error', '')}")
        via = req.get("via") if isinstance(req, dict) else None
        self.log.request(peer, op, reply, time.monotonic_ns(), via)
        return reply

    def _not_owner(self, req: dict[str, Any], peer: Peer | None) -> str | None:
        """Why `peer` may not confirm the session `req` names, or None. A confirmation
        operates the breaker on someone else's behalf, so it is the starter's (a session
        resumed after a restart is the controller's own user's) or a supervisor's."""
        if peer is None:
            return None  # in process (the demo), not over the socket
        sid = str(req.get("session"))
        owner = self.owners.get(sid, os.geteuid())
        if peer.uid == owner:
            return None
        if self.supervisors is not None and self.supervisors in peer.groups:
            return None
        who = f"uid {owner}"
        if self.cfg.supervisor_group:
            who += f" or group {self.cfg.supervisor_group} (control.supervisor_group)"
        return f"session {sid} was started by uid {owner}: only {who} may confirm it"

    # -- writing --------------------------------------------------------------------------

    def _reply(self, c: Client, obj: dict[str, Any], t: int) -> None:
        try:
            data = _line(obj)
        except (TypeError, ValueError, RecursionError) as exc:
            data = _line({"ok": False, "error": f"the reply could not be encoded: {exc}"})
        if len(c.out) + len(data) > self.cfg.max_output_bytes:
            self._limit(
                "control.output",
                f"{c.peer}: {len(c.out) + len(data)} reply bytes not taken "
                f"(control.max_output_bytes {self.cfg.max_output_bytes}): dropped",
            )
            self._drop(c)
            return
        c.out += data
        self._flush(c, t)

    def _flush(self, c: Client, t: int) -> None:
        """Write what the socket takes now, never more, never blocking."""
        if c.out:
            try:
                n = c.sock.send(c.out)
            except BlockingIOError:
                n = 0
            except OSError:
                self._drop(c)
                return
            del c.out[:n]
            if n:
                c.last_ns = t
        if c.out:
            if c.stalled_ns is None:
                c.stalled_ns = t
            self._want(c, write=True)
            return
        c.stalled_ns = None
        self._want(c, write=False)
        if c.has_line():
            os.eventfd_write(self.wake, 1)  # its next request, in the next round
        self._settle(c)

    def _want(self, c: Client, read: bool | None = None, write: bool | None = None) -> None:
        ev = c.events
        if read is not None:
            ev = ev | select.EPOLLIN if read else ev & ~select.EPOLLIN
        if write is not None:
            ev = ev | select.EPOLLOUT if write else ev & ~select.EPOLLOUT
        if ev != c.events:
            c.events = ev
            self.ep.modify(c.fd, ev)

    # -- time -----------------------------------------------------------------------------

    def tick(self, now_ns: int | None = None) -> None:
        """Timeouts (slow and idle clients), the limits' alarms, a paused accept."""
        t = time.monotonic_ns()
        if t < self._next_tick:
            return
        self._next_tick = t + 50_000_000
        self._sweep(t)
        if self._accept_paused_until is not None and t >= self._accept_paused_until:
            self._accept_paused_until = None
            self.ep.modify(self.sock.fileno(), select.EPOLLIN)
        self.log.advance(t)

    def _sweep(self, t: int) -> None:
        cfg = self.cfg
        slow = int(cfg.write_timeout_s * 1e9)
        idle = int(cfg.idle_timeout_s * 1e9)
        for c in list(self.clients.values()):
            if c.stalled_ns is not None and t - c.stalled_ns > slow:
                self._limit(
                    "control.slow",
                    f"{c.peer}: took no reply for {cfg.write_timeout_s:g} s "
                    f"(control.write_timeout_s, {len(c.out)} bytes waiting): dropped",
                )
                self._drop(c)
            elif not c.out and not c.has_line() and t - c.last_ns > idle:
                self._limit(
                    "control.idle",
                    f"{c.peer}: silent for {cfg.idle_timeout_s:g} s "
                    "(control.idle_timeout_s): closed",
                )
                self._answer_and_close(
                    c, f"idle for {cfg.idle_timeout_s:g} s (control.idle_timeout_s): closing"
                )

    def _drop(self, c: Client) -> None:
        if self.clients.pop(c.fd, None) is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.ep.unregister(c.fd)
        c.sock.close()
        c.out.clear()
        self.counts["closed"] += 1

    def close(self) -> None:
        for c in list(self.clients.values()):
            self._drop(c)
        if self._remove is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._remove(self.ep.fileno())
        self.sock.close()
        self.ep.close()
        os.close(self.wake)
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_ino == self._inode:  # ours, not a successor's
                self.path.unlink()
        self._lock.release()


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, default=str).encode() + b"\n"


def request(path: Path, obj: dict[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
    """One request to a running controller. `ControlUnavailable` if none listens; its
    `ControlDenied` if this user may not reach it, or what answers is not to be trusted
    (`trusted_folder`, `trusted_server`); `ControlFailed` for no answer in time or an
    answer that is not a JSON object. Each says what and where, for one line and exit 2."""
    path = Path(path)
    trusted_folder(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout_s)
    try:
        try:
            s.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise ControlUnavailable(f"no controller is listening on {path}") from exc
        except PermissionError as exc:
            raise ControlDenied(
                f"{path}: permission denied (the controller's user, root, or its "
                "control.group may use it)"
            ) from exc
        except TimeoutError as exc:
            raise ControlFailed(f"{path}: no connection within {timeout_s:g} s") from exc
        except OSError as exc:
            raise ControlFailed(f"{path}: cannot connect: {exc.strerror}") from exc
        trusted_server(s, path)
        # refused at once (a cap, a peer check): the reason may still be there to read
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(json.dumps(obj).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                chunk = b""
            except TimeoutError:
                raise ControlFailed(
                    f"the controller on {path} did not answer within {timeout_s:g} s"
                ) from None
            if not chunk:
                raise ControlUnavailable(f"the controller on {path} closed the connection")
            buf += chunk
            if len(buf) > MAX_ANSWER_BYTES:
                raise ControlFailed(f"the answer from {path} is over {MAX_ANSWER_BYTES} bytes")
        try:
            reply = json.loads(buf)
        except (ValueError, RecursionError):
            reply = None
        if not isinstance(reply, dict):
            raise ControlFailed(f"the answer from {path} is not a JSON object: {buf[:60]!r}")
        return reply
    finally:
        s.close()


#: An answer longer than this is not one of the controller's (a history is well below).
MAX_ANSWER_BYTES = 64 << 20


def trusted_folder(path: Path) -> None:
    """Talk only to a socket in a folder nobody else could have put it in: the folder
    must be ours or root's (a sticky one like /tmp, or one nobody else may write), or,
    for a path given explicitly, one of our groups' and writable by no one outside it
    (a controller's `control.group` folder). The default folder (`runtime_dir`) must be
    ours or root's: in /tmp anyone could have made `goosectl-UID` first and put a fake
    controller in it, which would be told every confirmation."""
    folder = path.parent
    try:
        st = os.stat(folder)
    except OSError:
        return  # connect says what is missing
    me = os.geteuid()
    mode = st.st_mode
    others_write = bool(mode & stat.S_IWOTH) and not mode & stat.S_ISVTX
    if st.st_uid in (me, 0) and not others_write:
        return
    ours = {os.getegid(), *os.getgroups()}
    if folder != runtime_dir() and st.st_gid in ours and not mode & stat.S_IWOTH:
        return
    why = f"mode {stat.S_IMODE(mode):04o}" if others_write else f"belongs to uid {st.st_uid}"
    raise ControlDenied(
        f"control folder {folder}: {why}, not yours, root's or your group's: refusing to "
        "talk to a socket someone else may have put there"
    )


def trusted_server(s: socket.socket, path: Path) -> None:
    """The process that answers must be ours, root's, or the folder's owner's (a
    controller sharing its socket with a group): read from the kernel (SO_PEERCRED)."""
    server = peer_of(s)
    allowed = {os.geteuid(), 0}
    with contextlib.suppress(OSError):
        allowed.add(os.stat(path.parent).st_uid)
    if server.uid not in allowed:
        raise ControlDenied(
            f"control socket {path}: answered by uid {server.uid} (pid {server.pid}), not by "
            "you, root or the folder's owner: refusing to talk to it"
        )
