"""Decide whether a test that needs a peer (tshark, libiec61850, root) runs or skips.

On a developer's machine a missing peer skips with the reason. In CI (`.ci/run` sets
GOOSECTL_REQUIRE_PEERS=1) the same absence is a failure, so a green CI never hides a peer
that was not installed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CAPTURES = SHARED / "captures"
SCL = SHARED / "scl"


def _require(ok: bool, reason: str) -> None:
    if ok:
        return
    if os.environ.get("GOOSECTL_REQUIRE_PEERS") == "1":
        pytest.fail(f"required peer missing in CI: {reason}")
    pytest.skip(reason)


def require_tshark() -> str:
    path = shutil.which("tshark")
    _require(path is not None, "tshark is not installed (Debian package tshark)")
    return path or ""


def require_binary(name: str, package: str) -> str:
    path = shutil.which(name)
    _require(path is not None, f"{name} is not installed (Debian package {package})")
    return path or ""


def require_root() -> None:
    _require(os.geteuid() == 0, "needs root for network namespaces and raw sockets")
    _require(shutil.which("ip") is not None, "needs iproute2 (`ip`) for namespaces")


def require_iec61850():
    try:
        import pyiec61850.pyiec61850 as iec
    except ImportError as exc:  # pragma: no cover - depends on the machine
        _require(False, f"libiec61850 bindings not importable (pip pyiec61850-ng): {exc}")
        raise
    return iec


def capture_files() -> list[Path]:
    files = sorted(CAPTURES.glob("*.pcap*"))
    _require(bool(files), f"no captures found in {CAPTURES}")
    return files
