"""`goosectl sim` as a process: first line is the port, a controller links up over it."""

from __future__ import annotations

import os
from pathlib import Path

from goosectl.controller.config.link import LinkConfig
from goosectl.controller.shell.serial_link import SerialLink
from tests.support.procs import Sim, goosectl

ROOT = Path(__file__).resolve().parents[2]


def test_sim_pty_prints_path_and_serves_with_faults() -> None:
    sim = Sim("--pty", "--corrupt", "0.05", "--drop", "0.05", "--seed", "3", "--spring-ms", "50")
    path = sim.port
    try:
        assert os.path.exists(path), path
        link = SerialLink(path, LinkConfig())
        try:
            assert link.open()
            assert link.run_until(lambda: link.state == "up", 10)
            seq = link.send_command("close")
            assert link.run_until(
                lambda: any(e.seq == seq and e.kind == "operation_complete" for e in link.events),
                10,
            )
        finally:
            link.close()
    finally:
        err = sim.stop(timeout_s=10)
    assert "operations={'close': 1}" in err


def test_sim_tcp_serves_pyserial_socket_url() -> None:
    sim = Sim("--tcp", "127.0.0.1:0")
    url = sim.port
    try:
        assert url.startswith("socket://127.0.0.1:")
        link = SerialLink(url, LinkConfig())
        try:
            assert link.open()
            assert link.run_until(lambda: link.state == "up", 10)
        finally:
            link.close()
    finally:
        sim.stop(timeout_s=10)


def test_sim_bad_arguments_exit_2_with_a_reason() -> None:
    r = goosectl("sim", "--pty", "--open-ms", "1", check=False, timeout=30, cwd=ROOT)
    assert r.returncode == 2 and "OPEN_TIME_MS=1 is outside 5..1000" in r.stderr
