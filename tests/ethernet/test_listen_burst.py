"""`goosectl listen` under a burst of real frames on a veth pair (root): nothing is lost
silently. The ABB capture (451 GOOSE frames of three publishers, priority-tagged) is sent
back to back, once and ten times over, while listen prints every frame as JSON."""

from __future__ import annotations

import pytest

from tests.ethernet.burst import Listener, MmsgSender, capture_frames

pytestmark = pytest.mark.root

ABB = capture_frames()


def config(tmp_path, body: str) -> str:
    path = tmp_path / "listen.yaml"
    path.write_text(body)
    return str(path)


def burst(wire, reps: int, *args: str) -> Listener:
    listener = Listener.start(wire.right, wire.veth.b, *args)
    MmsgSender(wire.open("a", timestamps=False), ABB * reps).send_all()
    listener.wait_quiet(len(ABB) * reps)
    listener.stop()
    return listener


@pytest.mark.parametrize("reps", [1, 10])
def test_every_frame_of_a_line_rate_burst_is_classified(wire, reps: int) -> None:
    got = burst(wire, reps)
    assert got.lines[0] == {"event": "listening", "ifaces": ["wb"], "rx": {"A": "tpacket_v3"}}
    frames = got.frames()
    assert len(frames) == 451 * reps
    # in the order sent, the VLAN priority tag the kernel stripped reported on each
    assert [f["stNum"] for f in frames] == [f["stNum"] for f in frames[:451]] * reps
    assert all(f["vlan"]["id"] == 0 and f["vlan"]["priority"] == 4 for f in frames)
    (stats,) = got.stats()  # no drop: only the closing line
    assert stats["received"] == 451 * reps
    assert (stats["drops"], stats["freeze"], stats["unread"]) == (0, 0, 0)
    assert stats["sides"]["A"]["kernel_packets"] == 451 * reps


def test_a_tiny_ring_drops_and_says_so_while_running(wire, tmp_path) -> None:
    cfg = config(tmp_path, "rx_ring:\n  frames: 20\n  block_kib: 4\n")
    listener = Listener.start(wire.right, wire.veth.b, "--config", cfg)
    MmsgSender(wire.open("a", timestamps=False), ABB * 10).send_all()
    # before any stop: the drop is reported as it is found
    early = listener.out.wait_for_json(
        lambda x: x.get("event") == "stats" and x["drops"] > 0, "a stats line with drops"
    )
    listener.wait_quiet(4_510)
    listener.stop()
    final = listener.stats()[-1]
    assert early["drops"] <= final["drops"]
    assert final["rx"] == {"A": "tpacket_v3"} and final["freeze"] >= 1
    # every frame sent is accounted for: printed, dropped by the kernel, or never read
    assert final["received"] + final["drops"] + final["unread"] == 4_510
    assert final["sides"]["A"]["kernel_packets"] == 4_510
    assert len(listener.frames()) == final["received"] < 4_510


def test_without_a_ring_the_loss_is_counted_too(wire, tmp_path) -> None:
    """`rx_ring: {version: 0}`: the receive buffer of old, a burst overflows it; the
    kernel's count of what it dropped is printed, so nothing vanishes silently."""
    got = burst(wire, 10, "--config", config(tmp_path, "rx_ring:\n  version: 0\n"))
    final = got.stats()[-1]
    assert final["rx"] == {"A": "recvmsg"}
    assert final["drops"] > 0
    assert len(got.frames()) == final["received"]
    assert final["received"] + final["drops"] + final["unread"] == 4_510


def test_bad_ring_config_names_the_file_field_and_reason(tmp_path) -> None:
    from tests.support.procs import goosectl

    cfg = config(tmp_path, "rx_ring:\n  block_kib: 3\n")
    out = goosectl("listen", "--iface", "lo", "--config", cfg, check=False, timeout=60)
    assert out.returncode == 2, out.stderr
    assert cfg in out.stderr and "rx_ring" in out.stderr
    assert "block_kib: 3 is not a power of two" in out.stderr
