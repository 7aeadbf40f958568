"""What a hostile or careless control client used to do to `goosectl run`,
done again to a real controller (separate processes, a real pty, a real Unix socket).

Each test reproduces the input of its row and asserts what a user notices: the reply, the
controller still running and still driving the device (the simulator's own counters), the
limit counted in the stop report and said on stderr. Nothing here measures time: the
timeouts given to the controller are its configuration, the ones in the test only bound a
failing run.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import threading
import time

from tests.support.procs import sim_counts

from .conftest import connect, read_line


def wait_session(ctl, sid: str, timeout_s: float = 30.0) -> dict:
    end = time.monotonic() + timeout_s
    while True:
        st = ctl.request({"op": "status", "session": sid})["status"]
        if st["state"] in ("completed", "aborted") or time.monotonic() > end:
            return st
        time.sleep(0.05)


def executed(sim_stats: str, command: str) -> int:
    """How often the simulator executed `command` (its stop line: executed={...})."""
    return sim_counts(sim_stats)[1].get(command, 0)


def trip_through_the_agent(ctl) -> dict:
    r = ctl.request({"op": "run", "procedure": "trip", "params": {}})
    assert r["ok"], r
    return wait_session(ctl, r["session"])


# -- row 1 -----------------------------------------------------------------------------------


def test_row1_a_1000_byte_nested_request_is_refused_and_the_loop_goes_on(controllers, sim):
    ctl = controllers()
    s = connect(ctl.sock)
    s.sendall(b"[" * 999 + b"\n")  # the 1,000 bytes
    r = read_line(s)
    assert r == {
        "ok": False,
        "error": "bad request: JSON nested deeper than 16 levels (control.max_depth)",
    }
    for hostile in (b'{"a":' * 300 + b"1" + b"}" * 300, b"[" * 5000, b'{"op": [' + b"[" * 40):
        s.sendall(hostile + b"\n")
        assert "nested deeper than 16" in read_line(s)["error"]
    s.sendall(b'{"op": "list"}\n')  # the same connection goes on
    assert read_line(s)["ok"]
    done = trip_through_the_agent(ctl)  # and so does the device
    assert done["state"] == "completed" and done["outcome"] == "done", done
    assert ctl.alive()
    report = ctl.stop()
    assert report["control"]["control.depth"] == 4
    assert executed(sim.stop(), "TRIP") == 1
    rows = ctl.journal("limit:control.depth")
    assert rows[0][1:4] == ("crossed", "ok", "exceeded")
    assert f"pid={os.getpid()}" in rows[0][4] and "nested deeper than 16" in rows[0][4]


def test_row1_a_line_over_the_length_cap_closes_that_client_only(controllers):
    ctl = controllers({"control": {"max_line_bytes": 4096}})
    s, other = connect(ctl.sock), connect(ctl.sock)
    s.sendall(b"x" * 100_000)  # no newline at all
    r = read_line(s)
    assert not r["ok"] and "longer than 4096 bytes (control.max_line_bytes)" in r["error"]
    assert _recv(s) == b""  # closed: nothing after it can be parsed again
    other.sendall(b'{"op": "list"}\n')
    assert read_line(other)["ok"]
    assert ctl.stop()["control"]["control.line"] == 1


# -- row 2 -----------------------------------------------------------------------------------


def test_row2_a_client_that_never_reads_is_dropped_and_the_device_is_served(controllers, sim):
    ctl = controllers({"control": {"write_timeout_s": 1}})
    hog = connect(ctl.sock)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = b'{"op": "list"}\n'
    sent = threading.Event()

    def flood() -> None:
        # 20,000 requests and never a read: the replies fill its socket, then the
        # controller stops answering it, then drops it
        with contextlib.suppress(OSError):  # dropped while still sending
            hog.sendall(request * 20_000)
        sent.set()

    threading.Thread(target=flood, daemon=True).start()
    done = trip_through_the_agent(ctl)  # while it holds on
    assert done["state"] == "completed" and done["outcome"] == "done", done
    assert ctl.request({"op": "list"})["ok"]
    ctl.err.wait_for(lambda x: "limit control.slow" in x, "the slow client dropped", 30)
    sent.wait(30)
    hog.settimeout(30)
    got = b""
    while chunk := _recv(hog):
        got += chunk
    replies = got.count(b"\n")
    assert 0 < replies < 20_000  # what fitted before it stopped reading; then closed
    assert ctl.alive()
    report = ctl.stop()
    assert report["control"]["control.slow"] == 1
    assert executed(sim.stop(), "TRIP") == 1


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except ConnectionResetError:
        return b""


# -- row 3 -----------------------------------------------------------------------------------


def _more_fds(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def test_row3_a_thousand_idle_connections_meet_the_cap_and_the_idle_timeout(controllers):
    _more_fds(4096)
    ctl = controllers({"control": {"max_clients": 16, "idle_timeout_s": 2}})
    conns = [connect(ctl.sock) for _ in range(1000)]
    answers = [read_line(c)["error"] for c in conns[16:]]
    # each is refused with the reason; one that came after an idle client was closed (a
    # slow machine takes more than 2 s for a thousand connects) got its place, then idled
    refused = [a for a in answers if a.startswith("too many control clients (16")]
    assert len(refused) >= 900
    assert all(a in refused or a.startswith("idle for 2 s") for a in answers), set(answers)
    # the 16 admitted ones say nothing: each is told and closed after the idle timeout
    for c in conns[:16]:
        assert "idle for 2 s" in read_line(c)["error"]
        assert c.recv(10) == b""
    for c in conns:
        c.close()
    assert ctl.request({"op": "list"})["ok"]
    report = ctl.stop()["control"]
    assert report["control.clients"] == len(refused)
    assert report["control.idle"] == 1000 - len(refused)


def test_row3_out_of_file_descriptors_a_connection_is_refused_not_the_controller(controllers):
    _more_fds(4096)

    def few_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    ctl = controllers({"control": {"max_clients": 1000, "idle_timeout_s": 2}}, preexec_fn=few_fds)
    conns = [connect(ctl.sock) for _ in range(200)]
    first = [read_line(c) for c in conns[100:]]  # past 64 fds: refused, each with a reason
    assert any("out of file descriptors" in a.get("error", "") for a in first), first[:3]
    ctl.err.wait_for(lambda x: "limit control.fds" in x, "the EMFILE alarm", 10)
    for c in conns:
        c.close()
    end = time.monotonic() + 30
    while True:  # the controller frees its descriptors as it sees the clients leave
        try:
            if ctl.request({"op": "list"})["ok"]:
                break
        except Exception:
            pass
        assert time.monotonic() < end and ctl.alive()
        time.sleep(0.1)
    assert ctl.stop()["control"]["control.fds"] >= 1


# -- row 4 -----------------------------------------------------------------------------------


def test_row4_8000_pipelined_runs_are_served_a_few_per_round_and_others_go_between(
    controllers, sim
):
    ctl = controllers()
    n = 8000
    flood = connect(ctl.sock, timeout_s=120)
    lines = b"".join(
        json.dumps({"op": "run", "procedure": "hello", "params": {"n": i}}).encode() + b"\n"
        for i in range(n)
    )
    threading.Thread(target=flood.sendall, args=(lines,), daemon=True).start()
    replies: list[dict] = []
    reader = threading.Thread(target=read_lines, args=(flood, n, replies), daemon=True)
    reader.start()
    # another operator, meanwhile: answered between the flood's requests, not after them
    while not replies:
        time.sleep(0.01)
    done = trip_through_the_agent(ctl)
    assert done["state"] == "completed" and done["outcome"] == "done", done
    served_before = len(replies)
    reader.join(300)
    assert served_before < n, "the flood was over before the other operator was served"
    assert len(replies) == n and all(r["ok"] for r in replies)
    sessions = [int(r["session"][1:]) for r in replies]
    assert sessions == sorted(sessions)  # one reply per request, in order
    report = ctl.stop()["control"]
    assert report["control.backlog"] >= 1  # the per-round budget held the flood back
    assert executed(sim.stop(), "TRIP") == 1


def read_lines(s: socket.socket, n: int, out: list[dict]) -> None:
    """Up to `n` reply lines into `out`, as they come."""
    buf = b""
    while len(out) < n:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        buf += chunk
        *done, buf = buf.split(b"\n")
        out.extend(json.loads(x) for x in done)
