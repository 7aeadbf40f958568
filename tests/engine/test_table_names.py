"""Names code reads a table by (`States`, `Fields`) are checked when the table loads: a
misspelt or renamed state or field fails the load, naming the constant, not one path at
run time."""

from __future__ import annotations

from pathlib import Path

import pytest

from goosectl.controller.agent.service import TABLE as SESSION_TABLE
from goosectl.controller.agent.service import AgentService, SessionFields, SessionStates
from goosectl.controller.engine import Table, TableError
from goosectl.controller.engine.names import Fields, States
from goosectl.controller.goose.publisher import PublisherFields, load_table
from goosectl.controller.link.core import HERE as LINK_TABLES
from goosectl.controller.link.core import CommandFields, LinkStates, load_tables

TABLE = """
name: lamp
initial: dark
states: [dark, lit]
events: [flip]
context:
  flips: sum
transitions:
  - {source: dark, event: flip, target: lit, actions: [{name: incr, args: {field: flips}}]}
  - {source: lit, event: flip, target: dark}
"""


class LampStates(States):
    table = "lamp"
    DARK = "dark"
    LIT = "lit"


class MisspeltStates(States):
    table = "lamp"
    LIT = "litt"


class MisspeltFields(Fields):
    table = "lamp"
    FLIPS = "flip_count"


def _lamp(tmp_path: Path) -> Path:
    path = tmp_path / "lamp.yaml"
    path.write_text(TABLE)
    return path


def test_names_the_table_has_load(tmp_path):
    table = Table.load(_lamp(tmp_path), names=(LampStates,))
    m = table.new()
    assert m.state == LampStates.DARK


def test_a_misspelt_state_fails_the_load_naming_the_constant(tmp_path):
    with pytest.raises(TableError) as err:
        Table.load(_lamp(tmp_path), names=(LampStates, MisspeltStates))
    (finding,) = err.value.findings
    assert finding.code == "unknown_name" and finding.item == "litt"
    assert "MisspeltStates.LIT names state 'litt'" in str(err.value)
    assert "it has: dark, lit" in str(err.value)


def test_a_misspelt_context_field_fails_the_load(tmp_path):
    with pytest.raises(TableError, match=r"MisspeltFields.FLIPS names context field"):
        Table.load(_lamp(tmp_path), names=(MisspeltFields,))


def test_names_of_another_table_fail_the_load(tmp_path):
    with pytest.raises(TableError, match=r"names table 'link', handed table 'lamp'"):
        Table.load(_lamp(tmp_path), names=(LinkStates,))


def test_a_state_renamed_in_the_link_table_fails_where_it_loads(tmp_path):
    """What a maintainer renaming `degraded` in link.yaml meets: the load names the code
    that still reads the old name."""
    text = (LINK_TABLES / "link.yaml").read_text().replace("degraded", "slow")
    path = tmp_path / "link.yaml"
    path.write_text(text)
    with pytest.raises(TableError, match=r"LinkStates.DEGRADED names state 'degraded'"):
        Table.load(path, names=(LinkStates,))


def test_the_shipped_tables_have_every_name_their_code_reads():
    tables = load_tables()
    assert tables["link"].spec.name == LinkStates.table
    assert tables["commands"].spec.name == CommandFields.table
    assert load_table().spec.name == PublisherFields.table
    session = Table.load(SESSION_TABLE, names=(SessionStates, SessionFields))
    assert {s.name for s in session.spec.states} >= set(SessionStates.declared().values())
    assert AgentService.__init__  # the service loads its table with the same names
