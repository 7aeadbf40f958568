"""`goosectl mode` as a user types it: against a running controller (`run --no-network` on
the simulator's pty) it says the mode and simulation mode the controller is in now, and
whether the request changed them; without one, one line naming the socket."""

from __future__ import annotations

import json
import signal
import socket
import subprocess

import pytest

from tests.support.peers import REPO
from tests.support.procs import Sim, goosectl, start_run, wait_running

BAY = REPO / "examples" / "controller" / "bay1.yaml"


@pytest.fixture
def controller(tmp_path, request):
    """The control socket of a running controller on the simulator (bay1.yaml, and the
    text a test appends to it as the fixture's parameter)."""
    sock = tmp_path / "ctl.sock"
    cfg = tmp_path / "bay.yaml"
    cfg.write_text(BAY.read_text() + getattr(request, "param", ""))
    with Sim("--pty", "--duration", "120", link=tmp_path / "device.pty") as sim:
        proc = start_run(
            sim.port,
            *("--config", str(cfg), "--duration", "100", "--state", str(tmp_path / "state")),
            *("--control", str(sock)),
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_running(proc)
            yield sock
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130


def mode(sock, *args: str) -> subprocess.CompletedProcess:
    return goosectl("mode", *args, "--control", str(sock), timeout=60)


def test_mode_says_the_mode_it_reads_and_sets(controller) -> None:
    assert mode(controller).stdout == "mode on, simulation off\n"
    assert mode(controller, "test").stdout == "mode test, simulation off (changed: mode)\n"
    again = mode(controller, "test").stdout
    assert again == "mode test, simulation off (unchanged: already so)\n"
    both = mode(controller, "test-blocked", "--simulation", "on").stdout
    assert both == "mode test-blocked, simulation on (changed: mode, simulation)\n"
    assert mode(controller).stdout == "mode test-blocked, simulation on\n"
    done = mode(controller, "on", "--simulation", "off", "--json")
    assert json.loads(done.stdout) == {
        "ok": True,
        "mode": "on",
        "simulation": False,
        "changed": ["mode", "simulation"],
    }


@pytest.mark.parametrize("controller", ["\ncontrol: {max_clients: 1}\n"], indirect=True)
def test_a_request_the_controller_refuses_is_one_line_and_exit_2(controller) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as held:
        held.connect(str(controller))  # the one client the controller takes
        done = goosectl("mode", "test", "--control", str(controller), check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"goosectl: mode: the controller on {controller} refused: too many control "
        "clients (1, control.max_clients)\n"
    )
    assert mode(controller).stdout == "mode on, simulation off\n"  # nothing changed


@pytest.mark.parametrize("args", [(), ("test",)], ids=["read", "set"])
def test_mode_without_a_controller_is_one_line_naming_the_socket(tmp_path, args) -> None:
    sock = tmp_path / "none.sock"
    done = goosectl("mode", *args, "--control", str(sock), check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"goosectl: no controller is listening on {sock}: start `goosectl run` (or "
        "`goosectl demo --serve`), or name its socket with --control PATH\n"
    )


def test_a_mistyped_mode_names_the_modes() -> None:
    done = goosectl("mode", "sleepy", check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert "invalid choice: 'sleepy' (choose from 'on', 'test', 'test-blocked', 'off'" in (
        done.stderr
    )
