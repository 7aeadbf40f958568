"""Stopping a paho client's network thread (`stop_loop`): paho 2.x's `loop_stop` sets the
stop flag, then reads the thread again to join it, while the thread clears that attribute
as it ends (known upstream; docs/fleet.md). A NATS node's probe failed on it in a test
run. Here the network thread is made to end exactly between those reads (it is
joined from inside `loop_stop`'s own `threading.current_thread()` call), so the race is
not left to chance. The client retries a closed port on loopback: no broker is needed."""

from __future__ import annotations

import socket
import threading
import time

import paho.mqtt.client as paho
import pytest

from goosectl.controller.fleet.mqtt import stop_loop


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def racing(monkeypatch):
    """A started client whose network thread ends inside `loop_stop`, between its reads."""
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="race")
    client.connect_async("127.0.0.1", _closed_port())
    client.loop_start()
    time.sleep(0.1)
    net = client._thread
    real = threading.current_thread
    pending = [True]

    def current_thread():
        me = real()
        if pending and me is not net:  # loop_stop's read, after the stop flag is set
            pending.clear()
            net.join(10)  # the thread sees the flag and ends (clearing `_thread`)
        return me

    monkeypatch.setattr(threading, "current_thread", current_thread)
    yield client, net
    monkeypatch.undo()


def test_paho_loop_stop_raises_when_the_thread_ends_between_its_reads(racing):
    """The race itself, so the test below cannot pass for want of it."""
    client, _ = racing
    with pytest.raises(AttributeError, match="'NoneType' object has no attribute 'join'"):
        client.loop_stop()


def test_stop_loop_stops_the_client_through_the_race(racing):
    client, net = racing
    stop_loop(client)
    assert not net.is_alive()
    stop_loop(client)  # stopping a stopped client is nothing
