"""What a new user met running the commands as the README shows them: the text output
of `decode` without the fields a person checks a frame by, and the smaller gaps, each
checked through the command line the user typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from goosectl.protocols.ethernet.pcap import PcapWriter
from goosectl.protocols.goose import BitString, Boolean, GooseFrame, encode_frame
from tests.support.peers import CAPTURES, REPO
from tests.support.procs import goosectl

SEL = CAPTURES / "brogoose_goose_orig.pcap"
BAY1 = REPO / "examples" / "scl" / "bay1.scd"


def test_decode_text_names_the_data_set_the_goid_and_the_time_quality() -> None:
    done = goosectl("decode", str(SEL))
    first = done.stdout.splitlines()[0]
    assert " datSet=SEL_351_1CFG/LLN0$three51to2411 " in first
    assert " goID=SEL_351_1 " in first
    # 0x9f: leap seconds known, clock not failed, synchronised, accuracy 31 (unspecified)
    assert " tq=0x9f(leap-seconds-known,accuracy-unspecified) " in first
    second = done.stdout.splitlines()[1]
    # 0xaa: leap seconds known, clock not synchronised, 10 bits of accuracy
    assert " tq=0xaa(leap-seconds-known,not-synchronized,10-bit) " in second


def test_the_wire_check_says_untagged_and_absent_never_none(tmp_path) -> None:
    trip = GooseFrame(
        gocb_ref="PROT1LD0/LLN0$GO$trip",
        dat_set="PROT1LD0/LLN0$dstrip",
        all_data=(Boolean(False), BitString.from_bits("0000000000000")),
        dst=bytes.fromhex("010ccd010001"),
        appid=0x1001,
        time_allowed_to_live=2000,
    )
    cap = tmp_path / "untagged.pcap"
    with PcapWriter(cap) as w:
        w.write(encode_frame(trip), 1_800_000_000 * 10**9)
    done = goosectl("replay", str(cap), "--scl", str(BAY1), "-q")
    assert "      vlanId untagged (expected 10 or 11)\n" in done.stdout
    assert "      goID absent (expected PROT1_TRIP)\n" in done.stdout  # the frame has none
    assert "None" not in done.stdout


def _two_prot1(tmp_path) -> Path:
    """bay1.scd with its second IED (BAY2, line 147) renamed to the first's name (PROT1,
    line 124)."""
    text = BAY1.read_text().replace('<IED name="BAY2"', '<IED name="PROT1"', 1)
    path = tmp_path / "two-prot1.scd"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--in-memory", "--ied", "GCTL1"],
        ["replay", str(SEL), "--ied", "GCTL1"],
        ["listen", "--iface", "lo", "--ied", "GCTL1", "--duration", "1"],
    ],
    ids=["demo", "replay", "listen"],
)
def test_two_ieds_of_one_name_are_an_error_naming_both_lines(tmp_path, argv) -> None:
    scd = _two_prot1(tmp_path)
    done = goosectl(*argv, "--config", str(scd), check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f'goosectl: bad config: {scd}:147: a second IED named "PROT1" (the first is on '
        "line 124): IED names must be unique in an SCL file\n"
    )
    assert list(tmp_path.iterdir()) == [scd]  # nothing written


def test_an_ied_that_subscribes_to_nothing_is_a_warning_naming_its_role(tmp_path) -> None:
    done = goosectl("replay", str(SEL), "--config", str(BAY1), "--ied", "PROT1", "-q")
    warned = [x for x in done.stderr.splitlines() if "subscribes to no GOOSE" in x]
    assert warned == [
        f"goosectl: {BAY1}: IED PROT1 (protection IED: trip on networks A and B) subscribes "
        "to no GOOSE stream: the config has no subscriptions and no inputs "
        "(the file was read for PROT1 alone, its other IEDs (BAY2, GCTL1, SCADA1) not: "
        "`goosectl scl show` tells which subscribe)"
    ], done.stderr
    quiet = goosectl("replay", str(SEL), "--config", str(BAY1), "--ied", "GCTL1", "-q")
    assert "subscribes to no GOOSE" not in quiet.stderr


def test_table_run_on_a_finished_journal_says_so(tmp_path) -> None:
    table = REPO / "examples" / "tables" / "breaker.yaml"
    events = REPO / "examples" / "tables" / "breaker-events.jsonl"
    argv = ("table", "run", str(table), "--events", str(events), "--journal")
    first = goosectl(*argv, str(tmp_path / "j.sqlite"))
    assert first.stdout  # the rows of the run
    again = goosectl(*argv, str(tmp_path / "j.sqlite"))
    assert again.stdout == ""  # nothing new: no row printed twice
    (said,) = again.stderr.splitlines()
    assert said.startswith(f"goosectl: {tmp_path / 'j.sqlite'}: every event of ")
    assert said.endswith("nothing left to run (another --journal starts over)")


def test_a_full_disk_names_the_folder_it_filled(tmp_path) -> None:
    from tests.support.smallfs import small_tmpfs

    with small_tmpfs(tmp_path / "small", size="64k") as small:
        done = goosectl("demo", "--in-memory", "--out", str(small / "d"), check=False)
    assert done.returncode == 2, done.stderr
    said = [x for x in done.stderr.splitlines() if "No space left on device" in x]
    assert said == [f"goosectl: --out {small / 'd'}: No space left on device"], done.stderr
