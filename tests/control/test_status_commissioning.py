"""`goosectl status` lists every configured subscription from the start: one never
received is the line that matters most when commissioning, so it is there before its
first frame, not after it."""

from __future__ import annotations

import json

from .conftest import goosectl


def test_status_lists_a_subscription_never_received(controllers) -> None:
    ctl = controllers()  # `run --no-network`: no frame will ever arrive
    done = goosectl("status", "--json", "--control", str(ctl.sock), check=False)
    assert done.returncode == 0, done.stderr
    lgos = {v["stream"]: v for v in json.loads(done.stdout)["lgos"]}
    assert set(lgos) == {"prot", "bay2-cilo", "scada"}, lgos
    for view in lgos.values():
        assert view["St"] is False and view["ErrSt"] == "never_received", view
    text = goosectl("status", "--control", str(ctl.sock), check=False)
    assert text.returncode == 0, text.stderr
    assert "never received" in text.stdout or "never_received" in text.stdout, text.stdout
    ctl.stop()
