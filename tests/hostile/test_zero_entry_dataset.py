"""A zero-entry data set on a subscribed stream crashed
`replay --device sim`. It is a data-set shape mismatch, refused like any other receive
rule: the replay runs to the end, no TRIP comes from it, and the refusal is named."""

from __future__ import annotations

import dataclasses
import re

from tests.gates.rewrite import frames_of, rewrite, write
from tests.support.procs import goosectl


def test_a_zero_entry_data_set_is_a_refused_shape_not_a_crash(tmp_path):
    demo = goosectl("demo", "--in-memory", "--out", str(tmp_path / "d"), check=False)
    assert demo.returncode == 0, demo.stderr
    empty = lambda f: dataclasses.replace(f, all_data=(), num_dat_set_entries=0)  # noqa: E731
    path = write(
        tmp_path / "empty.pcap", rewrite(frames_of(tmp_path / "d" / "scenario.pcap"), empty)
    )
    r = goosectl("replay", str(path), "--device", "sim", check=False)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    trips = re.findall(r"^\s+(\d+\.\d+) s  device   TRIP sent", r.stdout, re.M)
    assert trips == [], r.stdout
    assert "input    prot: invalid (shape)" in r.stdout, r.stdout
