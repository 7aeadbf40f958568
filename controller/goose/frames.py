"""The payload a stream machine receives: one parsed frame and where it came from."""

from __future__ import annotations

from typing import Any

from controller.goose.classify import Verdict


class FrameIn:
    """A received frame on its way through a stream machine.

    The stream's router judges the frame once and leaves the verdict here, so the action
    that follows in the same transition does not judge it a second time.
    """

    __slots__ = ("hdr", "side", "values", "verdict")

    def __init__(self, hdr: Any, side: str) -> None:
        self.hdr = hdr
        self.side = side
        self.verdict: Verdict | None = None
        self.values: tuple | None = None
