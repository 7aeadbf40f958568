"""Capture time -> replay time: a capture's clock may jump, the replay's clock may not.

A capture's timestamps come from whatever clock the capturing host had: NTP steps it back,
a bad RTC puts it in 1969 or 2150, a merged file leaps a day. Replaying a jump literally
is neither what happened on the wire nor bounded: a step of 10^6 s forward makes every
publisher catch up heartbeat by heartbeat (a million frames), a step back leaves the
timers armed in the future, and a time before 1970 or after 2106 cannot be written into a
GOOSE UtcTime or a pcap record.

So replay time follows capture time only by plausible steps. A step back, or forward by
more than `max_gap_ns`, is a `TimeJump`: reported, counted, and replay time continues
where it was, so the gap is not replayed and every armed timer keeps its remaining time
(the timers re-anchor to the capture's new clock). Replay time stays where a UtcTime and a
pcap can go: a capture that starts outside 1970..2106 is moved to 1970-01-01 (a `range`
jump, reported); replay time running past 2106-02-07T06:28:15Z is a `CaptureTimeError`.

Pure: timestamps in, replay times and jump records out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

NS = 1_000_000_000
#: Replay time stays in [MIN_NS, MAX_NS): the seconds of a GOOSE UtcTime are 32 bits.
MIN_NS = 0
MAX_NS = (1 << 32) * NS
#: Default largest forward step replayed as elapsed time (`goosectl replay --max-gap`).
DEFAULT_MAX_GAP_NS = 60 * NS


@dataclass(frozen=True, slots=True)
class TimeJump:
    """One discontinuity of a capture's clock and where the replay put the frame."""

    frame: int  # capture frame number
    capture_ns: int  # the frame's capture timestamp
    step_ns: int | None  # from the previous frame's capture time (None: the first frame)
    replay_ns: int  # the replay time the frame was given
    kind: Literal["back", "forward", "range"]

    def text(self) -> str:
        at = f"frame {self.frame}: capture time {_iso(self.capture_ns)}"
        if self.kind == "range":
            return (
                f"{at} is outside 1970..2106 (what a GOOSE UtcTime can carry); "
                f"replay time starts at {_iso(self.replay_ns)}"
            )
        step = self.step_ns or 0
        how = "goes back" if self.kind == "back" else "leaps forward"
        return f"{at} {how} {abs(step) / NS:.6f} s; the gap is not replayed, timers re-anchored"


class CaptureTimeError(ValueError):
    """Replay time would leave what a GOOSE UtcTime can carry."""


class CaptureClock:
    """Places each captured frame on the replay clock; see the module docstring."""

    def __init__(
        self,
        max_gap_ns: int = DEFAULT_MAX_GAP_NS,
        on_jump: Callable[[TimeJump], None] | None = None,
    ) -> None:
        if max_gap_ns < 0:
            raise ValueError(f"max_gap_ns must be >= 0, got {max_gap_ns}")
        self.max_gap_ns = max_gap_ns
        self.on_jump = on_jump
        #: jumps seen, by kind
        self.jumps: dict[str, int] = {"back": 0, "forward": 0, "range": 0}
        self._capture: int | None = None
        self._replay = 0
        self._pause: int | None = None

    @property
    def total_jumps(self) -> int:
        return sum(self.jumps.values())

    def place(self, frame: int, capture_ns: int) -> int:
        """The replay time of a frame captured at `capture_ns`."""
        last = self._capture
        self._capture = capture_ns
        if last is None:
            if MIN_NS <= capture_ns < MAX_NS:
                self._replay = capture_ns
                return capture_ns
            self._replay = MIN_NS
            return self._jump(TimeJump(frame, capture_ns, None, MIN_NS, "range"))
        step = capture_ns - last
        if self._pause is not None:  # the start of another loop over the capture
            self._replay += self._pause
            self._pause = None
        elif step < 0:
            return self._jump(TimeJump(frame, capture_ns, step, self._replay, "back"))
        elif step > self.max_gap_ns:
            return self._jump(TimeJump(frame, capture_ns, step, self._replay, "forward"))
        else:
            self._replay += step
        if self._replay >= MAX_NS:
            raise CaptureTimeError(
                f"frame {frame}: replay time passes {_iso(MAX_NS - 1)}, the last instant a "
                "GOOSE UtcTime can carry (the frames before it were replayed)"
            )
        return self._replay

    def pause(self, gap_ns: int) -> None:
        """The next frame comes `gap_ns` after the last one, whatever its capture time
        says (between two loops over one capture): not a jump."""
        self._pause = gap_ns

    def _jump(self, jump: TimeJump) -> int:
        self.jumps[jump.kind] += 1
        if self.on_jump is not None:
            self.on_jump(jump)
        return jump.replay_ns


def _iso(ns: int) -> str:
    """ISO 8601 UTC for any nanosecond count, even outside what datetime can show."""
    sec, frac = divmod(ns, NS)
    try:
        day = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=sec)
    except OverflowError:
        return f"{ns / NS:+.0f} s from the epoch"
    return f"{day:%Y-%m-%dT%H:%M:%S}.{frac:09d}Z"
