"""Imports run one way: the layer table of docs/ARCHITECTURE.md, enforced.

Each unit (a top-level package, or a package of `controller`) may import only the units
its row names. A unit's own modules are free. Module-level and function-level imports
count alike, with one exception: `lab` (the test peers and measuring harnesses) may be
loaded inside a function by the commands and the demo that offer `--live` lab runs, and
never at import time, so an installed controller starts without it.

A new package gets a row here (and in the architecture document) before its first import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("controller", "protocols", "firmware_sim", "lab")

#: the configured core: the config models, then what runs on them
CORE = {
    "controller.engine",
    "controller.config",
    "controller.goose",
    "controller.link",
    "controller.logic",
    "controller.ports",
}

#: unit -> the units it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "protocols": set(),
    "controller.engine": {"protocols"},
    # the config models and their loaders (YAML, SCL): below everything they configure
    "controller.config": {"protocols", "controller.engine"},
    # the seams the shells drive (typing.Protocols): what they name, nothing else
    "controller.ports": {"protocols", "controller.engine"},
    "firmware_sim": {"protocols", "controller.engine"},
    "controller.goose": {"protocols", "controller.engine", "controller.config"},
    "controller.link": {"protocols", "controller.engine", "controller.config"},
    "controller.logic": {
        "protocols",
        "controller.engine",
        "controller.config",
        "controller.goose",
        "controller.link",
    },
    "controller.agent": {"protocols", *CORE},
    "controller.display": {"protocols"},
    "controller.replay": {"protocols", *CORE},
    "controller.report": {
        "protocols",
        *CORE,
        "controller.agent",
        "controller.display",
        "controller.replay",
    },
    "controller.shell": {"protocols", *CORE, "controller.agent", "controller.report"},
    "controller.demo": {
        "protocols",
        *CORE,
        "controller.agent",
        "controller.display",
        "controller.replay",
        "controller.report",
        "controller.shell",
        "controller.errors",
        "firmware_sim",
    },
    # the web page: a separate process reading the control socket and the journal; no
    # unit of the controller imports it (only the commands do)
    "controller.web": {"protocols", *CORE, "controller.report", "controller.shell"},
    "controller.errors": set(),
    "controller.logs": set(),
    "controller.cli": {"*"},
    "controller.commands": {"*"},
    "controller.__main__": {"*"},
    "controller": {"*"},  # controller/__init__.py: the version only
    "lab": {
        "protocols",
        *CORE,
        "controller.agent",
        "controller.replay",
        "controller.report",
        "controller.shell",
        "controller.demo",
        "firmware_sim",
    },
}
#: units that may load `lab` inside a function (`--live` runs), never at import time
LAB_LOADERS = {"controller.commands", "controller.demo", "controller.cli"}
#: the only modules besides the commands that may import the simulator
SIMULATOR_USERS = (
    "controller/demo/simulator.py",
    "controller/demo/offline.py",
    "controller/demo/live.py",
)


def unit(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "controller" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def modules(root: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module imported, line, at module level) for every import of our packages."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    top |= {id(n) for s in tree.body if isinstance(s, ast.If | ast.Try) for n in ast.walk(s)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES:
                out.append((name, node.lineno, id(node) in top))
    return out


def own_unit(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    module = ".".join(rel.parts).removesuffix(".__init__")
    return unit(module)


def violations(root: Path = ROOT) -> list[str]:
    bad = []
    for path in modules(root):
        src = own_unit(path, root)
        allowed = ALLOWED.get(src)
        rel = path.relative_to(root)
        if allowed is None:
            bad.append(f"{rel}: unit {src} has no row in ALLOWED")
            continue
        for name, line, at_top in imports(path):
            dst = unit(name)
            if dst == src:
                continue
            if dst == "controller":  # the package root holds the version, nothing else
                continue
            if dst == "lab" and not at_top and src in LAB_LOADERS:
                continue
            if dst == "firmware_sim" and src == "controller.demo":
                if str(rel) not in SIMULATOR_USERS:
                    bad.append(f"{rel}:{line}: imports {name}; only {SIMULATOR_USERS} may")
                continue
            if "*" in allowed or dst in allowed:
                continue
            bad.append(f"{rel}:{line}: {src} imports {name} ({dst} is not below it)")
    return bad


def test_every_import_follows_the_layer_table() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("src", "line"),
    [
        ("controller/engine/x.py", "from controller.goose.hub import GooseHub"),
        ("controller/shell/x.py", "from firmware_sim.core import Firmware"),
        ("controller/goose/x.py", "import lab.netns"),
        ("controller/config/x.py", "from controller.goose.hub import GooseHub"),
        ("controller/demo/x.py", "from lab import netns"),  # at import time: refused
    ],
)
def test_an_upward_import_is_reported(src: str, line: str, tmp_path: Path) -> None:
    """The checker itself: each of these is a violation, named with file and line."""
    fake = tmp_path / src
    fake.parent.mkdir(parents=True)
    fake.write_text(line + "\n")
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
    found = violations(tmp_path)
    assert len(found) == 1 and found[0].startswith(src + ":1:"), found
