"""Hostile table, config and procedure documents.

A 417-byte YAML anchor bomb once took `goosectl table check` to 11 GB and froze a running
controller through its hot-reloaded procedures folder, where one bad file disabled all of
them. Every document is now parsed under `LoaderLimits` (size, aliases, nesting, expanded
nodes), a crossed limit is a `limit` finding naming the file, line and limit, and a bad
procedure file is rejected alone.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from goosectl.controller.agent.planner import FolderPlanner
from goosectl.controller.agent.service import AgentService
from goosectl.controller.engine import Table, TableError
from goosectl.controller.engine.loader import LoaderLimits, parse_document
from tests.support.procs import goosectl

REPO = Path(__file__).resolve().parents[2]
PROCEDURES = REPO / "controller" / "agent" / "procedures"

#: the classic billion-laughs document: 9 levels of 9 aliases, 9**9 strings once expanded
BOMB = "".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
        *(
            f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)

TABLE = """\
name: t
initial: a
states: [a, b]
final: [b]
events: [go]
transitions:
  - {source: a, event: go, target: b}
"""


def _cap_memory() -> None:  # in the child: the old loader took 11 GB; 1 GB is plenty
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _check(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return goosectl(
        "table",
        "check",
        *args,
        check=False,
        timeout=120,  # only bounds a failing run: the old loader never finished
        cwd=cwd or REPO,
        preexec_fn=_cap_memory,
    )


def findings(path: Path, **kw) -> list:
    try:
        Table.load(path, **kw)
    except TableError as exc:
        return exc.findings
    return []


def test_the_bomb_is_small():
    assert len(BOMB.encode()) < 420


def test_table_check_refuses_an_anchor_bomb_naming_file_line_and_limit(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    r = _check(str(bomb))
    assert r.returncode == 1, r.stderr
    assert f"{bomb}:" in r.stderr
    assert "[limit] max_nodes" in r.stderr and "once aliases are resolved" in r.stderr
    assert "Traceback" not in r.stderr


def test_limits_are_configurable_on_the_command_line(tmp_path):
    # 4 aliases: fine by default, refused at --max-aliases 3, with the line of the 4th
    doc = TABLE + "x-anchors: [&s a, *s, *s, *s, *s]\n"
    p = tmp_path / "t.yaml"
    p.write_text(doc)
    assert "max_aliases" not in _check(str(p)).stderr
    r = _check(str(p), "--max-aliases", "3")
    assert r.returncode == 1
    assert f"{p}:8: [limit] max_aliases: more than 3 YAML aliases" in r.stderr
    r = _check(str(p), "--max-bytes", "64")
    assert "[limit] max_bytes" in r.stderr


@pytest.mark.parametrize(
    ("name", "text", "limit"),
    [
        ("deep.yaml", TABLE + "x: " + "[" * 200 + "]" * 200 + "\n", "max_depth"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "max_depth"),
        ("deep.toml", "x = " + "[" * 5_000 + "]" * 5_000 + "\n", "max_depth"),
        ("wide.json", json.dumps({"x": [0] * 300_000}), "max_nodes"),
        ("self.yaml", TABLE + "x: &x [*x]\n", "max_depth"),
        ("big.yaml", TABLE + "#" * (1 << 20) + "\n", "max_bytes"),
    ],
)
def test_each_limit_is_a_finding_not_a_crash(tmp_path, name, text, limit):
    p = tmp_path / name
    p.write_text(text)
    fs = findings(p)
    assert [(f.code, f.item) for f in fs] == [("limit", limit)], fs
    assert fs[0].source == str(p)


def test_undecodable_and_unreadable_files_are_findings(tmp_path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes(TABLE.encode() + b"# caf\xe9\n")
    (f,) = findings(p)
    assert (f.code, f.line) == ("encoding", 8) and "0xe9" in f.reason
    (f,) = findings(tmp_path / "missing.yaml")
    assert f.code == "io"
    p = tmp_path / "huge-int.yaml"
    p.write_text(TABLE + "x: " + "9" * 5000 + "\n")
    (f,) = findings(p)
    assert f.code == "syntax"


def test_a_device_file_is_read_only_up_to_the_limit(tmp_path):
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    (f,) = findings(link, limits=LoaderLimits(max_bytes=4096))
    assert (f.code, f.item) == ("limit", "max_bytes")


def test_a_document_within_the_limits_loads_unchanged():
    data, line_of = parse_document(TABLE + "x: &v {k: 1}\ny: *v\n", "t", ".yaml")
    assert data["x"] == data["y"] == {"k": 1}
    assert line_of(("x", "k")) == 8 and line_of(("transitions", 0, "event")) == 7


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "procedures"
    folder.mkdir()
    for p in PROCEDURES.glob("*.yaml"):
        shutil.copy(p, folder / p.name)
    return folder


def test_a_bomb_in_the_procedures_folder_is_rejected_alone(tmp_path):
    folder = _folder(tmp_path)
    planner = FolderPlanner(folder)
    service = AgentService(planner)
    assert set(planner.available()) == {"close", "isolate"}
    # dropped into the folder of a running controller: the next request reloads it
    (folder / "bomb.yaml").write_text(BOMB)
    (folder / "broken.yaml").write_bytes(b"name: broken\n\xff\n")
    reply = service.request("close", {"bay": 1}, 0)
    assert reply["ok"], reply
    assert set(planner.available()) == {"close", "isolate"}
    assert "[limit] max_nodes" in planner.errors[str(folder / "bomb.yaml")]
    assert "[encoding]" in planner.errors[str(folder / "broken.yaml")]
    assert planner.rejections == {"limit": 1, "encoding": 1}
    # an operator who asks for it is told why it is not there
    reply = service.request("bomb", {}, 0)
    assert not reply["ok"]
    assert "bomb.yaml:6: [limit] max_nodes" in reply["error"]
    # unchanged files are not parsed again: the count stays
    planner.available()
    assert planner.rejections == {"limit": 1, "encoding": 1}


def test_a_procedure_replaced_by_a_bomb_keeps_its_last_good_version(tmp_path):
    folder = _folder(tmp_path)
    planner = FolderPlanner(folder, LoaderLimits(max_aliases=10))
    good = planner.plan("close").version
    (folder / "close.yaml").write_text(BOMB + "\n# grown\n")
    assert planner.plan("close").version == good
    assert "max_aliases=10" in planner.errors[str(folder / "close.yaml")]
    assert planner.plan("isolate").name == "isolate"
