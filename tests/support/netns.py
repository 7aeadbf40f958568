"""The pytest fixture for network namespaces, and a GOOSE hub behind `LiveGoose` on a veth
pair; the lab itself is `lab.netns` (the product's `demo --live` and `bench --live` use it
too)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from goosectl.controller.shell.goose_live import LiveGoose
from goosectl.lab.netns import NetLab, netlab
from goosectl.protocols.ethernet.rawsock import RawSocket
from tests.support.peers import require_root


def netlab_fixture(*, scope: str = "function", name: str | None = None) -> Callable:
    """Make a pytest fixture yielding a fresh `NetLab` (skips without root; CI fails).

    In a conftest: ``netlab = netlab_fixture()`` or
    ``shared_lab = netlab_fixture(scope="module", name="shared_lab")``.
    """

    @pytest.fixture(scope=scope, name=name)
    def _fixture() -> Iterator[NetLab]:
        require_root()
        with netlab() as lab:
            yield lab

    return _fixture


def live_on_veth(hub: Any, frames: list[bytes], count: int) -> tuple[LiveGoose, list[list[Any]]]:
    """`hub` behind `LiveGoose` on one end of a fresh veth pair (two namespaces, made and
    removed here; skips without root), `frames` sent from the other end; the loop runs
    until it has handled `count` frames. Returns the closed `LiveGoose` (its counters) and
    each handled frame's effects, in order."""
    require_root()
    with netlab() as lab:
        a, b = lab.namespace(), lab.namespace()
        lab.veth(a, b, a="tx0", b="rx0")
        with b.entered():
            live = LiveGoose(hub, "rx0", promiscuous=True)
        with a.entered():
            tx = RawSocket("tx0", timestamps=False)
        handled: list[list[Any]] = []

        def on_frame(n, ts, buf, v, out) -> None:
            handled.append(out)
            if len(handled) == count:
                live.stop()

        try:
            for f in frames:
                tx.send(f)
            # until_ns only bounds a failing test; a fixed 500 ms window was missed by a
            # process descheduled on a busy machine (the loop ended before its first read)
            live.run(on_frame=on_frame, until_ns=time.monotonic_ns() + 30_000_000_000)
        finally:
            tx.close()
            live.close()
    return live, handled
