"""The README's front door stays true: its two set-up commands make and use a virtual
environment, CI runs the test command exactly as written, and the extras it names exist.

(That the commands work on a plain clone is checked by hand before a release: a clone
without the sibling `shared` folder, the two commands pasted as they are; see the front door's
release check. This test keeps the text and CI from drifting apart in the meantime.)
"""

from __future__ import annotations

import argparse
import builtins
import re
import tomllib

import pytest

from goosectl.controller.cli import CommandError
from goosectl.controller.demo.live import run_live_demo
from tests.support.peers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
CI = (REPO / ".ci" / "run").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def setup_commands() -> list[str]:
    """The command lines of the set-up section's first code block."""
    section = README.split("## Set-up on a fresh machine", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_the_two_commands_create_and_use_a_venv() -> None:
    demo, tests = setup_commands()
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    assert demo == venv + "pip install -e . && goosectl demo"
    assert tests == venv + "pip install -e '.[test]' && python3 -m pytest"


def test_ci_runs_the_readme_s_two_commands_as_written() -> None:
    demo, tests = setup_commands()
    assert re.search(rf"^{re.escape(tests)}$", CI, re.M)
    assert re.search(rf"^{re.escape(demo)}( >/dev/null)?$", CI, re.M)
    assert "python3-venv" in CI  # Debian's venv module is a package of its own


def test_root_commands_are_shown_with_the_venv_s_path() -> None:
    assert "sudo .venv/bin/goosectl" in README
    assert "setcap cap_net_raw+ep .venv/bin/python3" in README


def test_the_live_extra_holds_libiec61850_and_the_test_extra_keeps_it() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(d.startswith("pyiec61850-ng") for d in extras["live"])
    assert any(d.startswith("pyiec61850-ng") for d in extras["test"])
    assert not any(d.startswith("pyiec61850") for d in PYPROJECT["project"]["dependencies"])
    assert "'.[live]'" in README


def test_demo_live_names_the_extra_when_the_bindings_are_missing(monkeypatch) -> None:
    real_import = builtins.__import__

    def no_bindings(name, *args, **kwargs):
        if name.startswith("pyiec61850"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_bindings)
    with pytest.raises(CommandError) as err:
        run_live_demo(argparse.Namespace(out=None, config=None, ied=None))
    assert "install the `live` extra, pip install -e '.[live]'" in str(err.value)
