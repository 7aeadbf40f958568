"""Imports run one way: the layer table of docs/ARCHITECTURE.md, enforced.

Each unit (a top-level package, or a package of `controller`) may import only the units
its row names. A unit's own modules are free. Module-level and function-level imports
count alike, with one exception: `lab` (the test peers and measuring harnesses) may be
loaded inside a function by the commands and the demo that offer `--live` lab runs, and
never at import time, so an installed controller starts without it.

A new package gets a row here (and in the architecture document) before its first import.

The same walk enforces the no-I/O rule: a pure unit imports none of the standard library's
clocks, sockets, threads, processes or databases (`FORBIDDEN`), except the few modules that
are the unit's own edge to the world, each named in `IO_EDGES` with the reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support import sources

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("controller", "protocols", "firmware_sim", "lab")
#: the one import name the four folders are installed under (goosectl/ links to them)
ROOT_NAME = "goosectl"
#: how an import that forgot the prefix is shown (no row of the table allows it)
BARE = "<bare>."

#: the configured core: the config models, then what runs on them
CORE = {
    "controller.engine",
    "controller.config",
    "controller.goose",
    "controller.link",
    "controller.logic",
    "controller.ports",
    "controller.prp",
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
    "controller.prp": {"protocols", "controller.engine", "controller.config"},
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
    # and `controller.logs`, whose events (status, alarm, limit) the shell reports through
    "controller.shell": {
        "protocols",
        *CORE,
        "controller.agent",
        "controller.report",
        "controller.logs",
    },
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
    # the uplink and the collector: processes beside the controller, never inside its loop
    "controller.fleet": {"protocols", *CORE, "controller.shell", "controller.logs"},
    # the web page: a separate process reading the control socket and the journal; no
    # unit of the controller imports it (only the commands do); the fleet's store rules
    "controller.web": {
        "protocols",
        *CORE,
        "controller.report",
        "controller.shell",
        "controller.fleet",
    },
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


#: the units that never read a clock, sleep, or touch a socket, a thread, a process or a
#: database: they take events and time in and give effects out (docs/ARCHITECTURE.md)
PURE = (
    "protocols",
    "controller.engine",
    "controller.config",
    "controller.ports",
    "controller.goose",
    "controller.link",
    "controller.prp",
    "controller.logic",
    "controller.agent",
    "controller.display",
    "firmware_sim",
)
#: what a pure unit may not import (module-level or in a function alike)
FORBIDDEN = frozenset(
    {
        "sqlite3",
        "socket",
        "select",
        "selectors",
        "threading",
        "time",
        "serial",
        "asyncio",
        "subprocess",
        "multiprocessing",
        "signal",
        "mmap",
    }
)
#: modules inside a pure unit that are its edge to the world, and why they live there
IO_EDGES = {
    # the transports of the wire codecs: the raw socket, its kernel ring and filter, and
    # the serial port, kept beside the bytes they carry so `protocols` is usable alone
    "protocols/ethernet/rawsock.py": "the AF_PACKET socket",
    "protocols/ethernet/ring.py": "the kernel's receive ring (mmap on the socket)",
    "protocols/ethernet/bpf.py": "the kernel's socket filter",
    "protocols/serial/port.py": "the serial port and its lock",
    # the simulated device's own shell: its firmware (firmware_sim/core.py) stays pure
    "firmware_sim/shell.py": "the simulator's loop",
    "firmware_sim/transport.py": "the simulator's pty, TCP and loop:// ports",
}


def unit(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "controller" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def modules(root: Path) -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (root / pkg).rglob("*.py"))


def imports(path: Path, packages: tuple[str, ...] = PACKAGES) -> list[tuple[str, int, bool]]:
    """(module imported, line, at module level) for every import of `packages`.

    The packages are imported under the one name `goosectl` (`goosectl.controller.goose`);
    the unit names here are the folders' (`controller.goose`), so the prefix is dropped, and
    an import without it (`import controller`: a second copy of the module, found only from
    a checkout) is reported as `<bare>.NAME`, which no row allows.
    `from goosectl.controller import goose` imports `controller.goose`: the names of a `from`
    import of a package are taken as its modules, so no unit reaches past the table
    through the package root."""
    tree = sources.tree(path)
    top = {id(n) for n in tree.body}
    top |= {id(n) for s in tree.body if isinstance(s, ast.If | ast.Try) for n in ast.walk(s)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module in {*PACKAGES, *(f"{ROOT_NAME}.{p}" for p in PACKAGES), ROOT_NAME}:
                names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if packages is PACKAGES:
                name = _layer_name(name)
            if name.split(".")[0] in packages or name.startswith(BARE):
                out.append((name, node.lineno, id(node) in top))
    return out


def _layer_name(name: str) -> str:
    """`goosectl.controller.goose` -> `controller.goose`; a bare `controller...` is marked."""
    parts = name.split(".")
    if parts[0] == ROOT_NAME and len(parts) > 1:
        return ".".join(parts[1:])
    if parts[0] in PACKAGES:
        return BARE + name
    return name


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
            if name == "controller.__version__":  # the package root holds the version
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


def io_violations(root: Path = ROOT) -> list[str]:
    """Every import of a clock, socket, thread, process or database in a pure unit."""
    bad = []
    for path in modules(root):
        rel = path.relative_to(root)
        if own_unit(path, root) not in PURE or str(rel) in IO_EDGES:
            continue
        for name, line, _ in imports(path, tuple(FORBIDDEN)):
            bad.append(f"{rel}:{line}: imports {name} (a pure unit does no I/O)")
    return bad


def test_every_import_follows_the_layer_table() -> None:
    assert violations() == []


def test_the_pure_units_do_no_io() -> None:
    assert io_violations() == []


def test_every_io_edge_exists() -> None:
    assert [p for p in IO_EDGES if not (ROOT / p).exists()] == []


@pytest.mark.parametrize(
    ("src", "line"),
    [
        ("controller/goose/x.py", "import time"),
        ("controller/engine/x.py", "from sqlite3 import connect"),
        ("controller/agent/x.py", "import threading"),
        ("protocols/goose/x.py", "import socket"),
    ],
)
def test_io_in_a_pure_unit_is_reported(src: str, line: str, tmp_path: Path) -> None:
    fake = tmp_path / src
    fake.parent.mkdir(parents=True)
    fake.write_text(f"def f():\n    {line}\n")
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(exist_ok=True)
    found = io_violations(tmp_path)
    assert len(found) == 1 and found[0].startswith(src + ":2:"), found


@pytest.mark.parametrize(
    ("src", "line"),
    [
        ("controller/engine/x.py", "from goosectl.controller.goose.hub import GooseHub"),
        ("controller/shell/x.py", "from goosectl.firmware_sim.core import Firmware"),
        ("controller/goose/x.py", "import goosectl.lab.netns"),
        ("controller/config/x.py", "from goosectl.controller.goose.hub import GooseHub"),
        ("controller/demo/x.py", "from goosectl.lab import netns"),  # at import time: refused
        ("controller/engine/x.py", "from goosectl.controller import goose"),  # the root's hole
        ("controller/shell/x.py", "from controller.engine import journal"),  # no prefix
        ("controller/shell/x.py", "import protocols.goose"),  # no prefix
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


def import_table() -> str:
    """The tables of docs/ARCHITECTURE.md's "Imports run one way", made from `ALLOWED`,
    `PURE` and `IO_EDGES`, so the document and the checker are one table."""
    rows = ["| unit | may import (besides itself) | pure: no I/O |", "|---|---|---|"]
    for src in sorted(ALLOWED):
        dst = ALLOWED[src]
        may = "anything" if "*" in dst else ", ".join(f"`{d}`" for d in sorted(dst)) or "—"
        rows.append(f"| `{src}` | {may} | {'yes' if src in PURE else ''} |")
    rows += ["", "| I/O edge inside a pure unit | why |", "|---|---|"]
    rows += [f"| `{path}` | {why} |" for path, why in IO_EDGES.items()]
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- import-table: tests/test_import_directions.py -->", "<!-- /import-table -->"


def test_the_architecture_document_shows_this_table() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    shown = doc.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert shown == import_table(), (
        "docs/ARCHITECTURE.md's import table differs from the checker's: paste "
        "`python -c 'from tests.test_import_directions import import_table as t; print(t())'`"
    )


def test_nothing_imports_a_folder_without_the_goosectl_prefix() -> None:
    """From a checkout `import controller` would work too (the folder is on sys.path) and
    load a second copy of every module beside `goosectl.controller`'s: two registries, two
    tables, isinstance checks that fail. Tests, benchmarks and the product use one name."""
    files = [*modules(ROOT), *(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    bare = [
        f"{path.relative_to(ROOT)}:{line}: {name.removeprefix(BARE)}"
        for path in files
        if MAY_IMPORT_BARE.search(sources.text(path))
        for name, line, _ in imports(path)
        if name.startswith(BARE)
    ]
    assert bare == []


#: a line that may hold a bare import: an `import` or `from` statement naming a folder (a
#: file without one is not parsed; `imports` decides for the files that have one)
_FOLDER = r"(?:" + "|".join(PACKAGES) + r")\b"
MAY_IMPORT_BARE = re.compile(
    rf"^[ \t]*(?:from[ \t]+{_FOLDER}"
    rf"|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*{_FOLDER})",
    re.M,
)


def test_the_bare_import_filter_finds_every_form() -> None:
    forms = ("import controller", "  from protocols.goose import x", "import os as o, lab.netns")
    for line in forms:
        assert MAY_IMPORT_BARE.search(f"x = 1\n{line}\n"), line
    assert not MAY_IMPORT_BARE.search("import os\nfrom goosectl.lab import netns\n# from lab\n")
