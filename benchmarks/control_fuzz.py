"""A hostile crowd on a controller's control socket, for `test_control_fuzz.py`.

    python -m benchmarks.control_fuzz --control PATH --seconds 30 --seed 12

Runs, at once and for `--seconds`: random and malformed request lines (random JSON of
every shape, random bytes, invalid UTF-8, truncated JSON, deep nesting, lines over the
length cap) on a few connections that read their replies; clients that pipeline thousands
of requests and never read; bursts of connections past the client cap, held idle; and
pipelined floods of `status` and `run` requests read back in full. It never sends a
request that could operate the breaker (no `confirm`/`deny` of a real session, no `mode`,
no procedure but `isolate`, which waits for a confirmation that never comes), so the trips
measured alongside are the only actuations. Paced with sleeps: a hostile client, not a
stolen core. Prints one JSON line of counts at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path

OPS = ["list", "status", "history", "abort", "redirect", "run", "confirm", "deny"]
counts: Counter[str] = Counter()
lock = threading.Lock()


def count(key: str, n: int = 1) -> None:
    with lock:
        counts[key] += n


def connect(path: str, timeout: float = 5.0) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
    except OSError:
        s.close()
        count("connect_failed")
        return None
    count("connected")
    return s


def random_value(rnd: random.Random, depth: int = 0):
    kind = rnd.randrange(8 if depth < 6 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.choice([True, False])
    if kind == 2:
        return rnd.choice([0, -1, 2**63, 2**200, 1e308, rnd.randrange(-1000, 1000)])
    if kind == 3:
        return "".join(chr(rnd.randrange(0, 0x3000)) for _ in range(rnd.randrange(12)))
    if kind == 4:
        return rnd.choice(["s1", "s999999", "", "isolate", "\x00", "../../etc/passwd"])
    if kind == 5:
        return [random_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {
        rnd.choice(["op", "session", "procedure", "params", "x", ""]): random_value(rnd, depth + 1)
        for _ in range(rnd.randrange(4))
    }


def safe_request(rnd: random.Random) -> dict:
    """A well-formed request that cannot operate anything."""
    op = rnd.choice(OPS)
    req: dict = {"op": op}
    if op in ("confirm", "deny", "history", "redirect"):
        req["session"] = f"s{rnd.randrange(100_000, 999_999)}"  # never a real one
    elif op == "abort":
        req["session"] = f"s{rnd.randrange(1, 100)}"  # ends what `run isolate` opened
    elif op == "run":
        req["procedure"] = rnd.choice(["isolate", "nope", "", "ISOLATE"])
        req["params"] = rnd.choice([{"bay": rnd.randrange(1, 500)}, {}, {"bay": "x"}])
    elif op == "status" and rnd.random() < 0.5:
        req["session"] = rnd.choice(["s1", "s2", "nope"])
    if op == "redirect":
        req["procedure"] = "nope"
    return req


def bad_line(rnd: random.Random, max_line: int) -> bytes:
    kind = rnd.randrange(9)
    if kind == 0:
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 200))).replace(b"\n", b"")
    if kind == 1:
        return b"[" * rnd.randrange(17, 5000)
    if kind == 2:
        return b'{"op": "list", "a": ' + b'{"b": ' * rnd.randrange(17, 400)
    if kind == 3:
        return json.dumps(safe_request(rnd)).encode()[: rnd.randrange(1, 20)]
    if kind == 4:
        return b"\xff\xfe\xfd" + b"x" * rnd.randrange(50)
    if kind == 5:
        return json.dumps(random_value(rnd)).encode()
    if kind == 6:
        return b" " * rnd.randrange(100)
    if kind == 7:
        return json.dumps({"op": "list", "pad": "y" * (max_line + 1000)}).encode()
    return json.dumps(safe_request(rnd)).encode()


def read_replies(s: socket.socket, want: int) -> int:
    got, buf = 0, b""
    while got < want:
        try:
            chunk = s.recv(1 << 16)
        except OSError:
            return got
        if not chunk:
            return got
        buf += chunk
        n = buf.count(b"\n")
        got += n
        buf = buf[buf.rfind(b"\n") + 1 :] if n else buf
    return got


def chatty(path: str, end: float, seed: int, max_line: int) -> None:
    """Random and malformed lines, one at a time, each reply read; reconnect when closed."""
    rnd = random.Random(seed)
    s = None
    while time.monotonic() < end:
        if s is None:
            s = connect(path)
            if s is None:
                time.sleep(0.05)
                continue
        line = bad_line(rnd, max_line)
        try:
            s.sendall(line + b"\n")
            count("lines_sent")
            if read_replies(s, 1) == 1:
                count("replies")
            else:
                raise OSError("closed")
        except OSError:
            count("closed_by_controller")
            s.close()
            s = None
        time.sleep(rnd.uniform(0.0005, 0.003))
    if s is not None:
        s.close()


def never_reads(path: str, end: float) -> None:
    """Clients that pipeline 5,000 requests each and never read: dropped by the controller."""
    while time.monotonic() < end:
        s = connect(path, timeout=2.0)
        if s is None:
            time.sleep(0.2)
            continue
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.sendall(b'{"op": "list"}\n' * 5000)
            count("slow_client_sent_all")
        except OSError:
            count("slow_client_dropped_while_sending")
        time.sleep(min(7.0, max(0.0, end - time.monotonic())))  # past write_timeout_s (5)
        s.close()


def crowds(path: str, end: float) -> None:
    """Bursts of 150 connections (past the cap), held idle for a second, then closed."""
    while time.monotonic() < end:
        conns = [c for c in (connect(path, timeout=1.0) for _ in range(150)) if c is not None]
        time.sleep(1.0)
        for c in conns:
            c.close()
        count("crowds")
        time.sleep(1.0)


def floods(path: str, end: float, seed: int) -> None:
    """2,000 pipelined `status` and `run isolate` requests, every reply read back."""
    rnd = random.Random(seed)
    while time.monotonic() < end:
        s = connect(path, timeout=10.0)
        if s is None:
            time.sleep(0.5)
            continue
        reqs = []
        for _ in range(2000):
            if rnd.random() < 0.2:
                reqs.append({"op": "run", "procedure": "isolate", "params": {"bay": 1 + len(reqs)}})
            else:
                reqs.append({"op": "status"})
        payload = b"".join(json.dumps(r).encode() + b"\n" for r in reqs)
        sender = threading.Thread(target=_send_all, args=(s, payload), daemon=True)
        sender.start()
        count("flood_replies", read_replies(s, len(reqs)))
        sender.join(5)
        s.close()
        count("floods")
        time.sleep(2.0)


def _send_all(s: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        s.sendall(data)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.control_fuzz")
    p.add_argument("--control", type=Path, required=True)
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--max-line", type=int, default=16384)
    args = p.parse_args(argv)
    path = str(args.control)
    end = time.monotonic() + args.seconds
    workers = [
        threading.Thread(target=chatty, args=(path, end, args.seed + i, args.max_line))
        for i in range(3)
    ]
    workers += [
        threading.Thread(target=never_reads, args=(path, end)),
        threading.Thread(target=never_reads, args=(path, end)),
        threading.Thread(target=crowds, args=(path, end)),
        threading.Thread(target=floods, args=(path, end, args.seed)),
    ]
    print("fuzzing", flush=True)
    for w in workers:
        w.daemon = True
        w.start()
    for w in workers:
        w.join(args.seconds + 30)
    print(json.dumps(dict(counts)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
