"""The time quality of `t` from the host clock (controller/shell/hostclock.py)."""

from __future__ import annotations

import pytest

from goosectl.controller.config.goose import PublisherCfg
from goosectl.controller.shell.hostclock import STA_UNSYNC, TIME_ERROR, quality_of, read_clock
from goosectl.protocols.goose import time_quality


@pytest.mark.parametrize(
    ("state", "status", "esterror_us", "expected"),
    [
        (TIME_ERROR, 0, 16_000_000, time_quality(clock_not_synchronized=True)),
        (0, STA_UNSYNC, 500, time_quality(clock_not_synchronized=True)),
        (0, 0, 1000, time_quality(leap_seconds_known=True, accuracy=9)),  # 2**-9 s >= 1 ms
        (0, 0, 1, time_quality(leap_seconds_known=True, accuracy=19)),
        (0, 0, 0, time_quality(leap_seconds_known=True, accuracy=24)),
        (1, 0, 2_000_000, time_quality(leap_seconds_known=True, accuracy=0)),  # TIME_INS
    ],
)
def test_kernel_clock_states_map_to_time_quality(state, status, esterror_us, expected):
    assert quality_of(state, status, esterror_us) == expected


def test_the_kernel_answers_and_the_octet_says_what_it_said():
    state, status, esterror = read_clock()
    q = quality_of(state, status, esterror)
    unsynced = state == TIME_ERROR or bool(status & STA_UNSYNC)
    assert bool(q & 0x20) == unsynced  # ClockNotSynchronized
    assert not q & 0x40  # ClockFailure only when the kernel cannot be asked


@pytest.mark.parametrize("src", ["00:00:00:00:00:00", "01:0c:cd:01:00:01"])
def test_a_publisher_never_sends_from_zeros_or_a_group_address(src):
    with pytest.raises(ValueError, match="src"):
        PublisherCfg(
            gocb_ref="A/LLN0$GO$x", dat_set="A/LLN0$ds", appid=1, dst="01:0c:cd:01:00:01", src=src
        )
