"""`goosectl agent` over the control socket of `goosectl demo --serve`."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.lines import Lines
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]


def agent(sock: Path, *args: str) -> subprocess.CompletedProcess:
    return goosectl("agent", "--control", str(sock), *args, check=False, timeout=60)


def test_without_a_controller_it_says_so_and_exits_2(tmp_path):
    r = agent(tmp_path / "none.sock", "list")
    assert r.returncode == 2
    assert "no controller is listening" in r.stderr and "goosectl run" in r.stderr


@contextlib.contextmanager
def serving_demo(folder: Path) -> Iterator[Path]:
    """`goosectl demo --serve` in `folder`, yielding its control socket once it serves;
    terminated after the block."""
    sock = folder / "demo.sock"
    demo = subprocess.Popen(
        [
            *(sys.executable, "-m", "goosectl", "demo", "--in-memory"),
            *("--out", str(folder / "d"), "--control", str(sock)),
            # ended by terminate() below: the test's pace must not race a deadline
            *("--serve", "600"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Ready once it says it serves: the socket file appears at bind(), before listen().
        Lines(demo.stderr).wait_for(
            lambda line: f"serving `goosectl agent --control {sock}`" in line,
            "the demo to serve its control socket",
            timeout=120,
        )
        yield sock
    finally:
        demo.terminate()
        demo.communicate(timeout=30)  # drain its pipes: a writer blocked on one never exits


def test_agent_commands_against_the_demo(tmp_path):
    with serving_demo(tmp_path) as sock:
        listed = json.loads(agent(sock, "list").stdout)
        assert listed["sessions"][0]["procedure"] == "isolate"  # the demo's own session
        assert set(listed["procedures"]) >= {"isolate", "close"}
        run = json.loads(agent(sock, "run", "isolate", "bay=2").stdout)
        assert run["ok"] and run["session"] == "s2"
        st = json.loads(agent(sock, "status", "s2").stdout)["status"]
        assert st["state"] == "awaiting_confirmation" and st["step"] == "open_breaker"
        aborted = agent(sock, "abort", "s2")
        assert json.loads(aborted.stdout).get("state") == "aborted", aborted.stdout
        hist = json.loads(agent(sock, "history", "s1").stdout)["history"]
        assert {h["machine"] for h in hist} == {"s1", "s1/wf"}
        assert hist[0]["event"] == "request"
        bad = agent(sock, "run", "isolate", "bay")
        assert bad.returncode == 2 and "not key=value" in bad.stderr
        # a refusal is a user mistake: one line on stderr, exit 2, nothing on stdout
        refused = agent(sock, "confirm", "s9")
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr == "goosectl: agent confirm s9: no session 's9'\n"
        unknown = agent(sock, "run", "nosuch")
        assert unknown.returncode == 2 and unknown.stdout == ""
        assert unknown.stderr.startswith("goosectl: agent run nosuch: ")
        assert len(unknown.stderr.splitlines()) == 1
