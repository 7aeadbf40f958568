"""GOOSE side: a device chattering its position every millisecond for
15 s, through the whole bay (firmware simulator -> device link -> bay -> XCBR Pos
publisher) on the virtual clock. The row saw 10,731 GOOSE frames in 15 s (155x normal).

Two defences bound it: the link's debounce (`device.chatter_max` changes per
`device.chatter_window_ms`, then only the settled position) and, behind it, the
publisher's own rate limit (`max_changes` new states per `change_window_ms`). Each is
checked alone, against a normal 15 s of the same bay in the same run, and in every case
the position the device settles in is the last state published."""

from __future__ import annotations

from pathlib import Path

import pytest

from goosectl.controller.config.bay import ControllerConfig
from goosectl.controller.config.load import load_config
from goosectl.controller.engine.effects import Alarm
from goosectl.controller.logic.core import BayController
from goosectl.controller.replay.virtual_wire import VirtualWire
from goosectl.firmware_sim.core import Firmware
from goosectl.protocols.goose import decode_frame
from goosectl.protocols.serial import messages as m

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "controller" / "bay1.yaml"
MS = 1_000_000
T0 = 1_750_000_000 * 1_000_000_000
POS = "GCTL1LD0/LLN0$GO$pos"


def _config(chatter_max: int | None = None, max_changes: int | None = None) -> ControllerConfig:
    cfg = load_config(CONFIG, ControllerConfig)
    device = cfg.device
    if chatter_max is not None:
        device = device.model_copy(update={"chatter_max": chatter_max})
    pubs = [
        p.model_copy(update={"max_changes": max_changes})
        if max_changes is not None and p.gocb_ref == POS
        else p
        for p in cfg.goose.publishers
    ]
    goose = cfg.goose.model_copy(update={"publishers": pubs})
    return cfg.model_copy(update={"device": device, "goose": goose})


def _run(cfg: ControllerConfig, chatter: bool) -> tuple[list, list, int]:
    """15 s of the bay (chattering every ms, or quiet), then 3 s to settle: the XCBR Pos
    frames sent, the alarms raised, and the device's final position (Dbpos)."""
    bay = BayController(cfg, T0)
    fw = Firmware(now_ns=T0)
    sent: list = []
    alarms: list = []

    def drain(now: int) -> None:
        sent.extend(f for f in bay.take_frames() if f.gocb_ref == POS)
        alarms.extend(r for r in bay.take_reports() if type(r) is Alarm)

    wire = VirtualWire(bay, fw, start_ns=T0, on_step=drain)
    bay.start(T0)
    bay.opened(T0)
    wire.run_until(T0 + 1000 * MS)
    assert bay.link.state == "up"
    start = wire.now_ns
    sent.clear()
    for i in range(15_000):
        now = start + (i + 1) * MS
        wire.run_until(now)
        if chatter:
            if i % 2 == 0:
                fw.inject("contacts_bad", None, now)
            else:
                fw.inject("contacts_ok", {"closed": i % 4 == 1}, now)
    wire.run_until(start + 18_000 * MS)
    drain(wire.now_ns)
    return sent, alarms, fw.machine("breaker").ctx["position"]


def _dbpos(sent: list) -> int:
    """The position (Dbpos) in the last state published: the data set's first member,
    a 2-bit string (XCBR Pos stVal)."""
    last = [d for d in map(decode_frame, (f.data for f in sent)) if d.sq_num == 0][-1]
    return last.all_data[0].data[0] >> 6 & 3


@pytest.mark.slow  # 15 s of chatter, four times over: the property, not the fast loop
def test_a_chattering_device_publishes_a_bounded_number_of_frames_and_its_final_position():
    normal, _, _ = _run(_config(), chatter=False)
    # the link's debounce alone (the publisher may publish every change it is told)
    link_only, link_alarms, final = _run(_config(max_changes=10**6), chatter=True)
    # the publisher's limit alone (the link tells the bay every change)
    pub_only, pub_alarms, final2 = _run(_config(chatter_max=10**6), chatter=True)
    # neither: the row as reported
    neither, _, _ = _run(_config(chatter_max=10**6, max_changes=10**6), chatter=True)
    print(
        f"\nXCBR Pos frames in 15 s: normal {len(normal)}, link debounce {len(link_only)}, "
        f"publisher limit {len(pub_only)}, neither {len(neither)}"
    )
    assert final == final2
    assert len(neither) > 7_000  # the row: thousands of frames (10,731 in the issue)
    # the publisher's limit alone: 20 new states a second at most, and their bursts
    assert len(pub_only) <= 30 * 18, len(pub_only)
    assert len(pub_only) * 10 < len(neither)
    assert any(a.name == f"publish_rate:{POS}" and a.active for a in pub_alarms)
    # the debounce alone: the logic hears chatter_max changes, then the settled position
    assert len(link_only) <= 3 * len(normal) + 100, len(link_only)
    assert any(a.name == "device:position_chatter" and a.active for a in link_alarms)
    # whichever defence held, the last state on the wire is where the breaker settled
    for sent in (link_only, pub_only):
        assert _dbpos(sent) == final, m.Dbpos(final).name
