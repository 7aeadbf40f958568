"""One config format for every command, and `goosectl config check` for any file.

A GOOSE-only file is the controller config with the bay parts absent: `goose:` alone, or
the goose section's keys at the top level. `replay` takes either file with and without
`--device sim`; goose keys beside bay keys are one pointed error, not "Extra inputs are not
permitted" on every key.
"""

from __future__ import annotations

import re

import pytest

from goosectl.controller import cli
from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.config.validate import ConfigError
from tests.support.peers import CAPTURES, REPO
from tests.support.procs import goosectl

CAP = CAPTURES / "iti_GOOSE.pcap"
EXAMPLES = REPO / "examples"
BAY = EXAMPLES / "controller" / "bay1.yaml"
GOOSE_FLAT = EXAMPLES / "goose" / "subscriptions.yaml"

SUB = """\
  - name: f650
    gocb_ref: GEDeviceF650/LLN0$GO$gcb01
    appid: 0x0001
    dst: 01:a0:f4:08:2f:77
"""


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "flat.yaml").write_text("subscriptions:\n" + SUB)
    (tmp_path / "nested.yaml").write_text(
        "goose:\n  subscriptions:\n" + SUB.replace("\n  ", "\n    ").replace("  - ", "    - ", 1)
    )
    (tmp_path / "mixed.yaml").write_text("device: {port: sim}\nsubscriptions:\n" + SUB)
    return tmp_path


def test_flat_and_nested_goose_only_files_are_the_same_config(files) -> None:
    flat = load_config(files / "flat.yaml", ControllerConfig)
    nested = load_config(files / "nested.yaml", ControllerConfig)
    assert flat == nested
    assert [s.name for s in flat.goose.subscriptions] == ["f650"]
    assert flat.inputs == [] and flat.publications == []
    assert load_config(files / "flat.yaml", GooseConfig) == nested.goose


def test_a_controller_config_gives_goose_commands_its_goose_section() -> None:
    assert load_config(BAY, GooseConfig) == load_config(BAY, ControllerConfig).goose


@pytest.mark.parametrize("config", ["flat.yaml", "nested.yaml", str(BAY), str(GOOSE_FLAT)])
@pytest.mark.parametrize("device", [[], ["--device", "sim"]], ids=["goose", "device-sim"])
def test_replay_takes_any_config_with_and_without_device_sim(files, capsys, config, device) -> None:
    # the F650's sqNum reset is an anomaly (exit 1) wherever the config subscribes it
    f650 = not device and config not in (str(BAY), str(GOOSE_FLAT))
    assert cli.main(["replay", str(CAP), "--config", config, *device]) == (1 if f650 else 0)
    out = capsys.readouterr()
    assert "Extra inputs" not in out.err
    assert "final bay state" in out.out if device else "streams:" in out.out


def test_goose_keys_beside_bay_keys_are_one_pointed_error(files) -> None:
    with pytest.raises(ConfigError) as err:
        load_config("mixed.yaml", ControllerConfig)
    assert str(err.value) == (
        "mixed.yaml:3: subscriptions: a key of the goose section: move it under `goose:` "
        "(one config format; README: Configuration)"
    )


def test_a_flat_file_s_errors_name_keys_as_written(files) -> None:
    (files / "bad.yaml").write_text("subscriptions:\n" + SUB.replace("0x0001", "0x1ffff"))
    with pytest.raises(ConfigError) as err:
        load_config("bad.yaml", ControllerConfig)
    assert str(err.value).startswith("bad.yaml:4: subscriptions.0.appid: ")


# ------------------------------------------------------------------ config check


@pytest.mark.parametrize(
    ("path", "says"),
    [
        (BAY, r"controller config: 3 subscriptions, 3 publishers, 3 inputs, 3 publications"),
        (GOOSE_FLAT, r"controller config: 2 subscriptions, 1 publisher \(GOOSE only"),
        (EXAMPLES / "scl" / "bay1.yaml", r"controller config: "),
        (EXAMPLES / "tables" / "breaker.yaml", r"table 'breaker' v1: 5 states"),
        (EXAMPLES / "procedures" / "isolate.yaml", r"procedure 'isolate' v1: 8 steps"),
        (EXAMPLES / "scl" / "bay1.scd", r"SCL: 4 IEDs \(PROT1, BAY2, SCADA1, GCTL1\), 6 GoCBs"),
        (REPO / "controller" / "logic" / "tables" / "bay.yaml", r"table 'bay'"),
    ],
    ids=["controller", "goose-only", "scl-overlay", "table", "procedure", "scl", "bay-table"],
)
def test_config_check_says_what_kind_of_file_it_is(capsys, path, says) -> None:
    assert cli.main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(rf"{re.escape(str(path))}: ok: {says}.*\n", out), out


def test_config_check_an_scl_file_as_an_ied_s_config(capsys) -> None:
    scd = EXAMPLES / "scl" / "bay1.scd"
    assert cli.main(["config", "check", str(scd), "--ied", "GCTL1"]) == 0
    assert "; as --ied controller config: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("states: [a]\ninitial: a\nname: t\nevents: [e]\ntransitions: [{source: b}]\n", "table"),
        ("name: p\nstart: x\nsteps: {x: {tool: nope}}\n", "procedure"),
        ("goose:\n  subscriptions: [{name: x}]\n", "config"),
    ],
)
def test_config_check_findings_exit_1_with_file_and_line(tmp_path, capsys, text, kind) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    assert cli.main(["config", "check", str(bad)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"goosectl: {bad}: {kind}: {len(err) - 1} finding(s)"
    assert all(line.startswith(str(bad)) for line in err[:-1])


# ------------------------------------------------------------------ table on a procedure


def test_table_check_on_a_procedure_checks_it_as_one(capsys) -> None:
    proc = EXAMPLES / "procedures" / "isolate.yaml"
    assert cli.main(["table", "check", str(proc)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{proc}: ok: procedure 'isolate' v1: 8 steps (3 to confirm)")
    assert "`goosectl config check`" in out


def test_table_check_on_a_broken_procedure_reports_the_procedure_s_findings(
    tmp_path, capsys
) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(
        "name: p\nstart: a\nsteps:\n  a: {tool: check, routes: {ok: b}}\n  b: {tool: note}\n"
    )
    assert cli.main(["table", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "blocked" in err  # the check tool's outcome the routes miss
    assert "Extra inputs" not in err and "states: Field required" not in err


# ------------------------------------------------------------------ what check counts


def _counted(stderr: str, path) -> tuple[int, int]:
    """(findings the last line reports, findings printed: lines not indented before it)."""
    *printed, last = stderr.splitlines()
    m = re.fullmatch(rf"goosectl: {re.escape(str(path))}: \w+: (\d+) finding\(s\)", last)
    assert m, last
    return int(m[1]), sum(1 for line in printed if not line[:1].isspace())


@pytest.mark.parametrize(
    ("text", "findings"),
    [
        # a parser's message spans lines: it quotes the line it stopped at, with a caret
        ("goose:\n  subscriptions: [\n", 1),
        ("states: [a\ninitial: a\n", 1),
        ("goose:\n  subscriptions:\n    - {gocb_ref: x, appid: 99999999, dst: zz}\n", 2),
    ],
    ids=["yaml-end", "yaml-flow", "two-fields"],
)
def test_config_check_counts_findings_not_lines(tmp_path, text, findings) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    done = goosectl("config", "check", str(bad), check=False)
    assert done.returncode == 1, done.stderr
    assert _counted(done.stderr, bad) == (findings, findings), done.stderr
    assert done.stderr.startswith(f"{bad}:")


def test_config_check_of_every_example_finds_nothing() -> None:
    examples = sorted(p for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".scd"))
    for path in examples:
        done = goosectl("config", "check", str(path))
        assert done.stdout.startswith(f"{path}: ok: ") and not done.stderr, path


def test_table_check_counts_findings_not_lines(tmp_path) -> None:
    """`table check` of a table that does not parse: the parser's message quotes the line it
    stopped at (several lines), shown as one finding, as `config check` shows it."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("states: [a\ninitial: a\n")
    done = goosectl("table", "check", str(bad), check=False)
    assert done.returncode == 1, done.stderr
    *printed, last = done.stderr.splitlines()
    assert last == f"goosectl: {bad}: 1 finding(s)", done.stderr
    assert sum(1 for line in printed if not line[:1].isspace()) == 1, done.stderr
