"""`listen` in observer mode fed 185,000 new streams grew from 78 to 665
MB. The stream table is capped (goose.max_streams): a new stream evicts the one idle
longest, every eviction is counted, and a stream that keeps sending is never evicted."""

from __future__ import annotations

from goosectl.controller.config.goose import GooseConfig
from goosectl.controller.goose.hub import GooseHub
from goosectl.protocols.goose import Boolean, FrameTemplate, GooseFrame, UtcTime

MS = 1_000_000
T = UtcTime(1_700_000_000, 0, 0x0A)


def _template(i: int) -> FrameTemplate:
    return FrameTemplate(
        GooseFrame(
            gocb_ref=f"FLOOD{i:06d}LD0/LLN0$GO$g",
            dat_set=f"FLOOD{i:06d}LD0/LLN0$ds",
            appid=0x3000 + (i % 0x1000),
            dst=bytes.fromhex("010ccd0100ff"),
            num_dat_set_entries=1,
        )
    )


def test_a_flood_of_new_streams_is_bounded_and_the_live_stream_stays():
    hub = GooseHub(GooseConfig(max_streams=100))
    bank = hub.bank
    assert bank.observer
    live = _template(999_999)
    data = live.encode_values((Boolean(True),))
    now = 0
    sq = 0
    for i in range(5_000):
        now += MS
        tpl = _template(i)
        hub.frame(tpl.build(1, 0, 2000, T, tpl.encode_values((Boolean(False),))), "A", now)
        if i % 10 == 0:  # the live publisher's heartbeat, every 10 new flood streams
            sq += 1
            hub.frame(live.build(1, sq, 2000, T, data), "A", now)
        hub.advance(now)
    assert len(bank.streams) == 100
    assert bank.evicted == 5_001 - 100
    assert any(s.gocb_ref.startswith("FLOOD999999") for s in bank.streams.values())
    # the machines and timers of evicted streams are gone too, not only the table row
    assert len(hub.scheduler.machines) <= 100 * 2 + len(hub.publishers)
    assert hub.counters()["evicted"] == bank.evicted
    live_stream = next(s for s in bank.streams.values() if s.gocb_ref.startswith("FLOOD999999"))
    assert live_stream.counts["retransmission"] == sq - 1
