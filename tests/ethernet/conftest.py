"""Fixtures: a fresh lab per test, and a veth "wire" with a raw socket factory per end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from goosectl.lab.netns import Namespace, NetLab, Veth
from goosectl.protocols.ethernet.rawsock import RawSocket
from tests.support.netns import netlab_fixture

netlab = netlab_fixture()


@dataclass
class Wire:
    """Two namespaces joined by one veth pair; `open(end)` opens a RawSocket on that end."""

    lab: NetLab
    left: Namespace
    right: Namespace
    veth: Veth
    sockets: list[RawSocket] = field(default_factory=list)

    def open(self, end: str, **kw) -> RawSocket:
        ns, ifname = (self.left, self.veth.a) if end == "a" else (self.right, self.veth.b)
        with ns.entered():
            sock = RawSocket(ifname, **kw)
        self.sockets.append(sock)
        return sock

    def mac(self, end: str) -> bytes:
        return self.left.mac(self.veth.a) if end == "a" else self.right.mac(self.veth.b)


@pytest.fixture
def wire(netlab: NetLab) -> Iterator[Wire]:
    left, right = netlab.namespace(), netlab.namespace()
    w = Wire(netlab, left, right, netlab.veth(left, right, a="wa", b="wb"))
    try:
        yield w
    finally:
        for sock in w.sockets:
            sock.close()


@pytest.fixture
def open_end(wire: Wire) -> Callable[..., RawSocket]:
    return wire.open
