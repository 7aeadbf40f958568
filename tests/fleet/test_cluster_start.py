"""Starting the 3-node NATS cluster (`controller.fleet.cluster`): its ports, and a node that
cannot start.

A CI run once lost the fleet benchmark this way: a port picked by binding port 0 came from
the kernel's ephemeral range, a node's outgoing route connection took it as its source
port before the node meant to listen on it started, that node exited ("address already in
use"), the start waited 30 s on a port nobody would open, and the two other nodes were
left running for the rest of the run."""

from __future__ import annotations

import socket

import pytest

from goosectl.controller.fleet.cluster import ephemeral_range, free_port
from tests.fleet.brokers import NatsCluster


def test_free_ports_are_outside_the_ephemeral_range_and_never_repeat():
    lo, hi = ephemeral_range()
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert not [p for p in ports if lo <= p <= hi], (lo, hi)


def test_a_node_that_cannot_bind_is_named_and_no_node_is_left_running(tmp_path):
    cluster = NatsCluster(tmp_path)
    with socket.socket() as taken:  # n2's route port, already listened on
        taken.bind(("127.0.0.1", cluster.route["n2"]))
        taken.listen()
        with pytest.raises(RuntimeError) as exc:
            cluster.start()
    message = str(exc.value)
    assert "NATS node n2 exited" in message and "address already in use" in message, message
    assert str(tmp_path / "n2.log") in message
    assert cluster.procs and all(p.poll() is not None for p in cluster.procs.values())
