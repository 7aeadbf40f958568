"""The journal as a user meets it through the CLI: its hash chain shows a row deleted,
rewritten or truncated away (`goosectl journal verify`), a file that is not a journal is
exit 2 naming it, the viewer shows rows in UTC, and no file is created through a link."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.procs import goosectl


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's scenario capture: a replay of it with the simulated device journals a bay."""
    folder = tmp_path_factory.mktemp("demo") / "d"
    goosectl("demo", "--in-memory", "--out", str(folder))
    return folder / "scenario.pcap"


def replay(capture: Path, journal: Path, *more: str, check: bool = True):
    return goosectl(
        "replay", str(capture), "--device", "sim", "--journal", str(journal), *more, check=check
    )


@pytest.fixture
def journal(capture: Path, tmp_path: Path) -> Path:
    j = tmp_path / "j.sqlite"
    replay(capture, j)
    return j


def verify(path: Path, *more: str):
    return goosectl("journal", "verify", str(path), *more, check=False)


def sql(path: Path, statement: str, *params: object) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(statement, params)
    db.close()


def test_an_untouched_journal_verifies(journal: Path) -> None:
    done = verify(journal)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{journal}: intact, ")


@pytest.mark.parametrize(
    ("attack", "statement", "first_bad"),
    [
        ("a row rewritten", "UPDATE journal SET target = 'closed' WHERE seq = 40", 40),
        # the row after the gap is the first whose link does not hold
        ("a row deleted", "DELETE FROM journal WHERE seq = 40", 41),
        ("the tail cut", "DELETE FROM journal WHERE seq >= 40", 40),
    ],
)
def test_a_changed_journal_fails_verify_naming_the_first_bad_seq(
    journal: Path, attack: str, statement: str, first_bad: int
) -> None:
    sql(journal, statement)
    done = verify(journal)
    assert done.returncode == 1, attack
    assert done.stdout.startswith(f"{journal}: seq {first_bad}: "), (attack, done.stdout)


def test_a_journal_emptied_to_zero_bytes_fails_verify(journal: Path) -> None:
    for name in (journal, Path(f"{journal}-wal"), Path(f"{journal}-shm")):
        if name.exists():
            os.truncate(name, 0)
    done = verify(journal)
    assert done.returncode == 1 and f"{journal}: seq 1: " in done.stdout


def test_a_keyed_chain_cannot_be_recomputed_without_the_key(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    j = tmp_path / "k.sqlite"
    goosectl(
        "replay", str(capture), "--device", "sim", "--journal", str(j),
        env={**os.environ, "GOOSECTL_JOURNAL_KEY_FILE": str(key)},
    )  # fmt: skip
    assert verify(j, "--key", str(key)).returncode == 0
    refused = verify(j)
    assert refused.returncode == 2 and "keyed" in refused.stderr
    other = tmp_path / "other"
    other.write_bytes(b"not the key")
    other.chmod(0o600)
    wrong = verify(j, "--key", str(other))
    assert wrong.returncode == 1 and "seq " in wrong.stdout


def test_the_same_capture_gives_the_same_journal_bytes_hashes_included(
    capture: Path, tmp_path: Path
) -> None:
    runs = []
    for k in range(2):
        j = tmp_path / f"j{k}.sqlite"
        replay(capture, j)
        db = sqlite3.connect(j)
        runs.append(list(db.execute("SELECT * FROM journal ORDER BY seq")))
        db.close()
    assert runs[0] == runs[1] and all(r[-1] for r in runs[0])


def test_a_file_that_is_not_a_journal_is_exit_2_naming_it(capture: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    done = replay(capture, bad, check=False)
    assert done.returncode == 2, done.stderr
    assert str(bad) in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_viewer_shows_rows_in_utc_filtered_by_machine_and_time(journal: Path) -> None:
    every = goosectl("journal", str(journal), "--json").stdout.splitlines()
    rows = [json.loads(x) for x in every]
    assert len(rows) > 100 and all(r["utc"].endswith("Z") for r in rows)
    bay = goosectl("journal", str(journal), "--machine", "bay", "--json").stdout.splitlines()
    assert bay and all(json.loads(x)["machine"] == "bay" for x in bay)
    assert len(bay) < len(rows)
    text = goosectl("journal", str(journal), "--machine", "bay").stdout.splitlines()
    assert text[0].split()[0] == rows[[r["machine"] for r in rows].index("bay")]["utc"]
    later = rows[len(rows) // 2]["utc"]
    since = goosectl("journal", str(journal), "--since", later, "--json").stdout.splitlines()
    assert 0 < len(since) < len(rows)
    assert goosectl("journal", str(journal), "--since", "-1m").stdout == ""  # capture is old
    bad = goosectl("journal", str(journal), "--since", "yesterday", check=False)
    assert bad.returncode == 2 and "--since yesterday" in bad.stderr


# -- files created never through a link ---------------------------------------------------


def test_replay_out_never_writes_through_a_planted_symlink(capture: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("root's secret\n")
    victim.chmod(0o600)
    link = tmp_path / "out.pcap"
    link.symlink_to(victim)
    done = goosectl("replay", str(capture), "--device", "sim", "--out", str(link), check=False)
    assert done.returncode == 2 and str(link) in done.stderr
    assert victim.read_text() == "root's secret\n"


def test_a_dangling_journal_symlink_does_not_create_its_target(
    capture: Path, tmp_path: Path
) -> None:
    target = tmp_path / "made-by-root"
    link = tmp_path / "j.sqlite"
    link.symlink_to(target)
    done = replay(capture, link, check=False)
    assert done.returncode == 2 and str(link) in done.stderr and "symbolic link" in done.stderr
    assert not target.exists()


def test_demo_out_is_a_private_folder_its_files_never_through_links(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    goosectl("demo", "--in-memory", "--out", str(out))
    assert out.stat().st_mode & 0o077 == 0
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    done = goosectl("demo", "--in-memory", "--out", str(shared), check=False)
    assert done.returncode == 2 and "writable by others" in done.stderr


def test_a_journal_cut_short_is_exit_2_naming_it_not_an_internal_error(
    capture: Path, journal: Path
) -> None:
    """A file cut in the middle of its pages ("database disk image is malformed") was a
    traceback and exit 70: it is the user's file that is broken, so exit 2 and a line."""
    os.truncate(journal, journal.stat().st_size // 2)
    for argv in (
        ["journal", str(journal)],
        ["replay", str(capture), "--device", "sim", "--journal", str(journal)],
    ):
        done = goosectl(*argv, check=False)
        assert done.returncode == 2, (argv, done.stderr)
        assert str(journal) in done.stderr and "Traceback" not in done.stderr
