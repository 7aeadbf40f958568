"""The payload a stream machine receives: one parsed frame and where it came from."""

from __future__ import annotations

from goosectl.controller.goose.classify import Verdict
from goosectl.controller.goose.fastpath import Facts


class FrameIn:
    """A received frame on its way through a stream machine.

    The stream's router judges the frame once and leaves the verdict here, so the action
    that follows in the same transition does not judge it a second time; that action leaves
    the receive rules' answer here for the subscriber bank.
    """

    __slots__ = ("foreign", "gate", "hdr", "refused", "side", "values", "verdict")

    def __init__(
        self,
        hdr: Facts,
        side: str,
        gate: tuple[bool, bool] = (False, False),
        foreign: bool = False,
    ) -> None:
        self.hdr = hdr
        #: from another source MAC than the one the stream learned (a conflict, judged)
        self.foreign = foreign
        self.side = side
        #: (controller in simulation mode, subscription switched to its simulated stream)
        self.gate = gate
        self.verdict: Verdict | None = None
        self.values: tuple | None = None
        #: the receive rule that refused the frame, set by the stream's `accept`
        self.refused: str | None = None
