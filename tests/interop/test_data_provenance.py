"""The real-world files in tests/data are the bytes their PROVENANCE.md describes.

The suite reads only these copies, which travel with the repository, so a plain clone
runs it; this pins each copy to the size and sha256 its provenance table states, and
checks that every file in the folder is listed (none unaccounted for, none missing).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.support.peers import CAPTURES, SCL


def _table(folder: Path) -> dict[str, tuple[int, str]]:
    """file -> (bytes, sha256) from the markdown table of folder/PROVENANCE.md."""
    rows = {}
    for line in (folder / "PROVENANCE.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[-1].isalnum() and len(cells[-1]) == 64:
            rows[cells[0]] = (int(cells[-2]), cells[-1])
    return rows


@pytest.mark.parametrize(
    "folder", [CAPTURES, SCL, CAPTURES.parent / "rgoose"], ids=lambda p: p.name
)
def test_every_data_file_matches_its_provenance_row(folder: Path) -> None:
    table = _table(folder)
    files = sorted(p.name for p in folder.iterdir() if p.name != "PROVENANCE.md")
    assert files == sorted(table), "a file without a provenance row, or a row without a file"
    for name, (size, digest) in table.items():
        data = (folder / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, digest), name
