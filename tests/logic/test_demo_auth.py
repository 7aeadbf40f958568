"""The demo's attacks on the protection trip (IEC 62351-6): a forged trip without a MAC, one
with a wrong MAC and a replayed genuine trip; none trips, the forgeries are refused on the
timeline with their reasons."""

from __future__ import annotations

import re

from goosectl.controller.demo.offline import run_demo


def test_the_demo_refuses_its_forged_and_replayed_trips(tmp_path) -> None:
    result = run_demo(tmp_path / "demo", pty=False)
    lines = result.timeline
    text = "\n".join(lines)
    assert re.search(r"17\.000 s  refused  prot .*auth_unsigned \(no security extension", text)
    assert re.search(r"17\.500 s  refused  prot .*auth_bad_mac \(the MAC does not verify\)", text)

    def seconds(line: str) -> float:
        return float(line.split()[0])

    # no TRIP from 16.9 s on: the forgeries (17.0, 17.5) and the replay (18.0) act on nothing
    late = [x for x in lines if x.split() and x.split()[0][0].isdigit() and seconds(x) > 16.9]
    assert late and not [x for x in late if "TRIP sent" in x], late
    # while the genuine trips before were acted on
    assert [x for x in lines if "TRIP sent (protection)" in x and seconds(x) < 16]
    prot = next(v for v in result.lgos if v.label == "prot")
    assert dict(prot.refused)["auth_unsigned"] == 1 and dict(prot.refused)["auth_bad_mac"] == 1
