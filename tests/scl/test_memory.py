"""Reading one IED's config out of a large SCD costs memory for what is kept, not for the
file: `goosectl scl config BIG.scd --ied X` on a generated 100 MB station of 11,500 small
IEDs, its peak RSS measured in a subprocess of its own (getrusage of its children), and
the config it writes the same as the one read from the whole document."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from goosectl.controller.config.scl.loader import config_data
from goosectl.protocols.scl import load_scl
from tests.scl.scdgen import scd_text, station
from tests.support.peers import REPO

#: Runs goosectl as its only child and prints that child's peak RSS (KiB on Linux).
MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
sys.stderr.write(done.stderr.decode())
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


@pytest.mark.slow
def test_one_ied_of_a_100_mb_scd_is_read_in_well_under_1_gb(tmp_path: Path) -> None:
    big = tmp_path / "big.scd"
    big.write_text(scd_text(station(11_500, 0)))
    assert big.stat().st_size > 100_000_000
    argv = [sys.executable, "-m", "goosectl", "scl", "config", str(big), "--ied", "IED000"]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    code, peak_kib = map(int, done.stdout.split())
    assert code == 0, done.stderr
    assert peak_kib < 1024 * 1024, f"peak RSS {peak_kib / 1024:.0f} MiB"


def test_what_one_ied_needs_is_what_the_whole_document_gives(tmp_path: Path) -> None:
    """The IED, the IEDs it receives from and their addresses: the same config either
    way, and no finding about the IEDs read past."""
    small = tmp_path / "small.scd"
    small.write_text(scd_text(station(30, 2)))
    whole = load_scl(small)
    for name in ("IED000", "IED007", "IED029"):
        kept = load_scl(small, name)
        assert set(kept.ieds) == {name, f"IED{(int(name[3:]) + 1) % 30:03d}"}
        assert config_data(kept, name)[0] == config_data(whole, name)[0]
        assert list(kept.findings) == []
