"""What a user installing goosectl gets: the wheel carries the package data the
code finds through importlib.resources and a py.typed per top-level package, one version
everywhere, scapy only as an extra, and examples that are plain files.

Nothing is installed: the wheel is built from a copy of the source (so the checkout gets
no build/ folder) with pip's ordinary isolated build, and opened as the zip it is; "scapy
absent" is a child interpreter in which `import scapy` fails."""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import goosectl.controller as controller
from goosectl.controller.config.bay import DEFAULT_CONFIG
from goosectl.controller.engine.journal import SOFTWARE_KEY, Journal
from goosectl.controller.shell.journal_store import open_journal
from tests.support.peers import CAPTURES, REPO

PACKAGES = ("controller", "protocols", "firmware_sim")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _data_files() -> set[str]:
    """Every non-Python file the packages hold in git's view of the tree (tables,
    procedures, default configs, specs, py.typed, the web page's HTML, CSS and module)."""
    listed = subprocess.run(
        ["git", "ls-files", "--", *PACKAGES],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    suffixes = (".yaml", ".md", ".typed", ".html", ".css", ".js")
    return {p for p in listed if Path(p).suffix in suffixes}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    src = tmp_path_factory.mktemp("src")
    for name in (*PACKAGES, "lab", "goosectl", "pyproject.toml", "README.md"):
        path = REPO / name
        if path.is_dir():  # goosectl/'s links to the folders are kept as links
            shutil.copytree(
                path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "-w", str(out), "--no-deps", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (whl,) = out.glob("goosectl-*.whl")
    with zipfile.ZipFile(whl) as z:
        yield z


def test_the_wheel_carries_every_table_procedure_default_and_py_typed(wheel) -> None:
    names = set(wheel.namelist())
    expected = _data_files()
    assert {f"{p}/py.typed" for p in PACKAGES} <= expected  # committed, so shipped
    assert "controller/config/defaults/bay1.yaml" in expected
    assert "controller/agent/procedures/isolate.yaml" in expected
    assert "controller/web/static/app.js" in expected
    assert sorted({f"goosectl/{p}" for p in expected} - names) == []


def test_the_wheel_installs_one_top_level_name(wheel) -> None:
    """Four generic names (`controller`, `protocols`, ...) in site-packages would clash with
    other distributions; the folders ship under `goosectl` only."""
    tops = {n.split("/")[0] for n in wheel.namelist() if ".dist-info/" not in n}
    assert tops == {"goosectl"}
    (top_level,) = [n for n in wheel.namelist() if n.endswith(".dist-info/top_level.txt")]
    assert wheel.read(top_level).decode().split() == ["goosectl"]


def test_the_installed_wheel_runs_as_goosectl_and_python_m_goosectl(wheel, tmp_path) -> None:
    """The wheel alone, outside the checkout: its `goosectl` package is the one imported (not
    the editable checkout's), and `python -m goosectl` is the command."""
    target = tmp_path / "site"
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            wheel.filename,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [sys.executable, "-c", "import goosectl.controller.cli as c; print(c.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert where.stdout.startswith(str(target)), (where.stdout, where.stderr)
    cap = str(CAPTURES / "iti_GOOSE.pcap")
    decoded = subprocess.run(
        [sys.executable, "-m", "goosectl", "decode", cap],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert decoded.returncode == 0 and len(decoded.stdout.splitlines()) == 8, decoded.stderr


def test_one_version_scapy_only_as_an_extra(wheel) -> None:
    (meta_name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    meta = Parser().parsestr(wheel.read(meta_name).decode())
    assert meta["Version"] == controller.__version__
    scapy = [r for r in meta.get_all("Requires-Dist") if r.startswith("scapy")]
    assert scapy and all("extra ==" in r for r in scapy), scapy
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(d.startswith("scapy") for d in extras["scapy"])
    assert any(d.startswith("scapy") for d in extras["test"])  # CI still tests the layer
    assert PYPROJECT["project"]["dynamic"] == ["version"]


NO_SCAPY = """
import sys
sys.modules["scapy"] = None  # `import scapy` raises ImportError, as when it is absent
from goosectl.controller.cli import main
sys.argv[0] = "goosectl"
sys.exit(main(sys.argv[1:]))
"""


def goosectl_without_scapy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_SCAPY, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )


def test_commands_work_without_scapy() -> None:
    cap = str(CAPTURES / "iti_GOOSE.pcap")
    decoded = goosectl_without_scapy("decode", cap)
    assert decoded.returncode == 0, decoded.stderr
    assert len(decoded.stdout.splitlines()) == 8
    replayed = goosectl_without_scapy("replay", cap, "--quiet")
    # 1: the F650's sqNum reset is an anomaly
    assert replayed.returncode == 1 and "streams:" in replayed.stdout, replayed.stderr
    checked = goosectl_without_scapy("config", "check", str(REPO / "examples/controller/bay1.yaml"))
    assert checked.returncode == 0 and ": ok: " in checked.stdout, checked.stderr
    version = goosectl_without_scapy("--version")
    assert version.stdout == f"goosectl {controller.__version__}\n"


def test_every_module_but_the_scapy_layer_imports_without_scapy_and_the_layer_names_the_extra():
    code = """
import importlib, pkgutil, sys
sys.modules["scapy"] = None
for top in ("goosectl.controller", "goosectl.protocols", "goosectl.firmware_sim"):
    for info in pkgutil.walk_packages(importlib.import_module(top).__path__, top + "."):
        if info.name.endswith(("__main__", "scapy_layer")):
            continue
        importlib.import_module(info.name)
try:
    import goosectl.protocols.goose.scapy_layer
except ImportError as exc:
    print(exc)
"""
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "pip install 'goosectl[scapy]'" in r.stdout


def test_examples_are_plain_files_equal_to_the_packaged_defaults() -> None:
    links = [p for p in (REPO / "examples").rglob("*") if p.is_symlink()]
    assert links == []
    packaged = REPO / "controller" / "agent" / "procedures"
    copies = REPO / "examples" / "procedures"
    assert sorted(p.name for p in copies.glob("*.yaml")) == sorted(
        p.name for p in packaged.glob("*.yaml")
    )
    pairs = [(copies / p.name, p) for p in packaged.glob("*.yaml")]
    pairs.append((REPO / "examples/controller/bay1.yaml", DEFAULT_CONFIG))
    for copy, source in pairs:
        assert filecmp.cmp(copy, source, shallow=False), f"{copy} differs from {source}"


def test_the_journal_records_the_software_version(tmp_path) -> None:
    path = tmp_path / "j.sqlite"
    journal = open_journal(path)
    journal.flush(0)
    journal.close()
    assert open_journal(path).get_meta(SOFTWARE_KEY) == {"goosectl": controller.__version__}
    assert Journal(None).get_meta(SOFTWARE_KEY) is None  # memory journals write nothing
