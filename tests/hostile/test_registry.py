"""A table's `registry:` imported any module it named, so `table check`
ran a `.py` lying next to the table (as root). Now a registry comes from an installed
package, or from a folder the user names with `--registry-path DIR`; anything else is a
`registry` finding that says where the code is and how to allow it, and is never run.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from goosectl.controller.engine import Table, TableError
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]

TABLE = """\
name: t
registry: {module}
initial: a
states: [a, b]
final: [b]
events: [go]
transitions:
  - {{source: a, event: go, target: b, guard: planted_guard}}
"""

#: a module that proves it ran by leaving a file behind
PLANTED = """\
import pathlib
pathlib.Path(__file__).with_name("ran-" + __name__).write_text("imported")
from goosectl.controller.engine.registry import Registry
REGISTRY = Registry(__name__)
REGISTRY.guard(lambda ctx, ev: True, name="planted_guard")
"""


def _plant(folder: Path, module: str = "neighbour") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(PLANTED)
    table = folder / "t.yaml"
    table.write_text(TABLE.format(module=module))
    return table


def _check(table: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return goosectl("table", "check", str(table), *args, check=False, timeout=120, cwd=cwd)


def test_check_never_imports_a_module_next_to_the_table(tmp_path):
    table = _plant(tmp_path / "tables")
    # run from the table's folder (python -m puts the current directory first on sys.path)
    r = _check(table, cwd=table.parent)
    assert r.returncode == 1
    assert f"{table}:2: [registry] neighbour:" in r.stderr
    assert f"{table.parent / 'neighbour.py'}" in r.stderr
    assert f"--registry-path {table.parent}" in r.stderr
    assert not (table.parent / "ran-neighbour").exists()
    # and from anywhere else
    r = _check(table, cwd=REPO)
    assert r.returncode == 1 and "not an installed package" in r.stderr
    assert not (table.parent / "ran-neighbour").exists()


def test_check_never_imports_a_module_in_the_current_directory(tmp_path):
    _plant(tmp_path / "cwd", "in_cwd")
    table = tmp_path / "tables" / "t.yaml"
    table.parent.mkdir()
    table.write_text(TABLE.format(module="in_cwd"))
    r = _check(table, cwd=tmp_path / "cwd")
    assert r.returncode == 1 and "not an installed package" in r.stderr
    assert not (tmp_path / "cwd" / "ran-in_cwd").exists()


def test_registry_path_is_the_consent(tmp_path):
    table = _plant(tmp_path / "tables")
    r = _check(table, "--registry-path", str(table.parent), cwd=table.parent)
    assert r.returncode == 0, r.stderr
    assert "ok: table 't'" in r.stdout
    assert (table.parent / "ran-neighbour").read_text() == "imported"


def test_a_package_in_a_consented_folder_loads_with_its_own_imports(tmp_path):
    pkg = tmp_path / "plugins" / "myreg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("def always(ctx, ev):\n    return True\n")
    (pkg / "actions.py").write_text(
        "from goosectl.controller.engine.registry import Registry\n"
        "from myreg.helpers import always\n"
        "REGISTRY = Registry('myreg')\n"
        "REGISTRY.guard(always, name='planted_guard')\n"
    )
    table = tmp_path / "t.yaml"
    table.write_text(TABLE.format(module="myreg.actions"))
    with pytest.raises(TableError) as info:
        Table.load(table)
    assert "cannot be imported" in str(info.value)
    t = Table.load(table, registry_path=[tmp_path / "plugins"])
    assert t.name == "t"


@pytest.mark.parametrize(
    "table",
    [
        "controller/goose/tables/stream.yaml",
        "controller/logic/tables/bay.yaml",
        "firmware_sim/tables/spring.yaml",
    ],
)
def test_installed_registries_still_load(table, tmp_path):
    r = _check(REPO / table, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    ("module", "reason"),
    [
        ("../../etc/passwd", "is not a module name"),
        (".relative", "is not a module name"),
        ("goosectl.controller.engine.no_such_module", "cannot be imported"),
        ("json", "has no REGISTRY"),
    ],
)
def test_bad_registry_names_are_findings(tmp_path, module, reason):
    table = tmp_path / "t.yaml"
    table.write_text(TABLE.format(module=f'"{module}"'))
    with pytest.raises(TableError) as info:
        Table.load(table)
    (f,) = [f for f in info.value.findings if f.code == "registry"]
    assert reason in f.reason and f.line == 2


def test_a_registry_that_fails_while_importing_is_a_finding(tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "broken_reg.py").write_text("raise RuntimeError('boom')\n")
    table = tmp_path / "t.yaml"
    table.write_text(TABLE.format(module="broken_reg"))
    with pytest.raises(TableError) as info:
        Table.load(table, registry_path=[tmp_path / "plugins"])
    assert "failed while importing: RuntimeError: boom" in str(info.value)
