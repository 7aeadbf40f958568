"""RawSocket across a real veth pair between two namespaces the test creates (needs root)."""

from __future__ import annotations

import errno
import os
import selectors
import shutil
import subprocess
import sys
import time

import pytest

from goosectl.lab.netns import vlan_supported
from goosectl.protocols.ethernet.rawsock import (
    FrameSizeError,
    LinkDownError,
    RawSocket,
    RawSocketPermissionError,
)
from goosectl.protocols.ethernet.vlan import TPID_STAG, VlanTag, insert_tag
from tests.ethernet.frames import GROUP_A, GROUP_B, frame, labels, read_until
from tests.support.peers import REPO, require_binary, require_kernel_feature

pytestmark = pytest.mark.root


def test_untagged_frame_crosses_with_kernel_timestamp(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A])
    sent = frame(GROUP_A, b"plain")
    before = time.time_ns()
    tx.send(sent)
    (got,) = read_until(rx, b"plain")
    after = time.time_ns()
    assert got.frame == sent
    assert got.vlan is None
    # SO_TIMESTAMPNS is CLOCK_REALTIME: it must fall between the two readings around it.
    assert got.ts_ns is not None and before <= got.ts_ns <= after
    assert (tx.stats.sent, rx.stats.received) == (1, 1)


@pytest.mark.parametrize(
    "tag",
    [
        VlanTag(vid=10, pcp=4),
        VlanTag(vid=0, pcp=5),  # priority-tagged: VID 0 must still be reported as a tag
        VlanTag(vid=4094, pcp=7, dei=1),
        VlanTag(vid=1, pcp=0),
        VlanTag(vid=20, pcp=3, tpid=TPID_STAG),
    ],
    ids=str,
)
def test_tagged_frame_reports_vlan_from_auxdata(wire, tag: VlanTag) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A])
    untagged = frame(GROUP_A, b"tagged")
    tx.send(insert_tag(untagged, tag))
    (got,) = read_until(rx, b"tagged")
    assert got.vlan == tag
    # The kernel stripped the tag from the bytes; putting it back gives the wire frame.
    assert got.frame == untagged
    assert insert_tag(got.frame, got.vlan) == insert_tag(untagged, tag)


def test_timestamps_can_be_turned_off(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A], timestamps=False)
    tx.send(frame(GROUP_A, b"nots"))
    (got,) = read_until(rx, b"nots")
    assert got.ts_ns is None


def test_other_ethertypes_are_filtered_in_the_kernel(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", promiscuous=True)
    tx.send(frame(GROUP_A, b"ipv4", ethertype=0x0800))
    tx.send(insert_tag(frame(GROUP_A, b"sv-tagged", ethertype=0x88BA), VlanTag(5, 4)))
    tx.send(frame(GROUP_A, b"marker"))
    got = read_until(rx, b"marker")
    assert labels(got, [b"ipv4", b"sv-tagged", b"marker"]) == [b"marker"]


def test_ethertype_is_configurable(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", promiscuous=True, ethertype=0x88BA)
    tx.send(frame(GROUP_A, b"goose"))
    tx.send(frame(GROUP_A, b"sampled", ethertype=0x88BA))
    got = read_until(rx, b"sampled")
    assert labels(got, [b"goose", b"sampled"]) == [b"sampled"]


def test_only_joined_groups_are_delivered_without_promiscuous(wire) -> None:
    tx = wire.open("a")
    rx = wire.open("b", groups=["01:0c:cd:01:00:01"])
    watcher = wire.open("b", promiscuous=True)
    tx.send(frame(GROUP_B, b"not-joined"))
    tx.send(insert_tag(frame(GROUP_B, b"not-joined-tagged"), VlanTag(10, 4)))
    tx.send(frame(GROUP_A, b"joined"))
    got = read_until(rx, b"joined")
    assert labels(got, [b"not-joined", b"joined"]) == [b"joined"]
    # The observer in promiscuous mode saw everything, so the frames did cross the wire.
    seen = read_until(watcher, b"joined")
    assert len(seen) == 3


def test_join_and_leave_at_run_time(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A])
    rx.join(GROUP_B)
    assert rx.groups == (GROUP_A, GROUP_B)
    tx.send(frame(GROUP_B, b"after-join"))
    assert labels(read_until(rx, b"after-join"), [b"after-join"]) == [b"after-join"]
    rx.leave("01-0C-CD-01-00-02")
    assert rx.groups == (GROUP_A,)
    tx.send(frame(GROUP_B, b"after-leave"))
    tx.send(frame(GROUP_A, b"marker"))
    assert labels(read_until(rx, b"marker"), [b"after-leave", b"marker"]) == [b"marker"]


def test_membership_reaches_the_interface_multicast_list(wire) -> None:
    wire.open("b", groups=[GROUP_B])
    maddr = wire.right.ip("maddr", "show", "dev", wire.veth.b).stdout
    assert "01:0c:cd:01:00:02" in maddr


def test_unicast_to_own_mac_is_delivered(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b")
    tx.send(frame(wire.mac("b"), b"unicast"))
    assert labels(read_until(rx, b"unicast"), [b"unicast"]) == [b"unicast"]


def test_own_frames_are_not_read_back(wire) -> None:
    tx = wire.open("a", promiscuous=True)
    same_iface_observer = wire.open("a", promiscuous=True)
    echo = wire.open("b", promiscuous=True)
    tx.send(frame(GROUP_A, b"outbound"))
    read_until(echo, b"outbound")
    echo.send(frame(GROUP_A, b"inbound"))
    for sock in (tx, same_iface_observer):
        got = read_until(sock, b"inbound")
        assert labels(got, [b"outbound", b"inbound"]) == [b"inbound"]


def test_selector_readiness_and_batch_order(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A])
    names = [f"n{i:03d}".encode() for i in range(50)]
    for name in names:
        tx.send(frame(GROUP_A, name))
    with selectors.DefaultSelector() as sel:
        sel.register(rx, selectors.EVENT_READ)
        assert sel.select(5.0)
    got = read_until(rx, names[-1])
    assert labels(got, names) == names
    assert rx.recv_frame() is None


def test_truncated_frame_is_counted_and_skipped(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A], max_frame=128)
    tx.send(frame(GROUP_A, b"too-big", size=600))
    tx.send(frame(GROUP_A, b"fits", size=100))
    got = read_until(rx, b"fits")
    assert labels(got, [b"too-big", b"fits"]) == [b"fits"]
    assert rx.stats.truncated == 1


def test_send_rejects_bad_sizes(wire) -> None:
    tx = wire.open("a")
    with pytest.raises(FrameSizeError, match=r"13-byte frame on 'wa'.*Ethernet header"):
        tx.send(bytes(13))
    with pytest.raises(FrameSizeError, match=r"2000-byte frame on 'wa'.*MTU"):
        tx.send(frame(GROUP_A, b"jumbo", size=2000))


def test_link_down_and_up(wire) -> None:
    tx, rx = wire.open("a"), wire.open("b", groups=[GROUP_A])
    wire.veth.set("a", False)
    # The loop learns of it without sending: the socket turns readable with a pending error.
    with selectors.DefaultSelector() as sel:
        sel.register(tx, selectors.EVENT_READ)
        assert sel.select(5.0)
    with pytest.raises(LinkDownError, match=r"receive on 'wa'.*down"):
        tx.recv_frame()
    with pytest.raises(LinkDownError, match=r"send on 'wa'.*down") as info:
        tx.send(frame(GROUP_A, b"while-down"))
    assert info.value.errno == errno.ENETDOWN
    wire.veth.set("a", True)
    deadline = time.monotonic() + 10
    while True:  # carrier comes back asynchronously after `ip link set up`
        tx.send(frame(GROUP_A, b"after-up"))
        try:
            got = read_until(rx, b"after-up", timeout=0.5)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    assert b"while-down" not in b"".join(rx.frame for rx in got)


def test_removed_interface_reports_link_down(wire) -> None:
    rx = wire.open("b", groups=[GROUP_A])
    wire.right.ip("link", "del", wire.veth.b)
    with pytest.raises(LinkDownError, match="'wb'"):
        for _ in range(3):
            rx.recv_frame()
            rx.send(frame(GROUP_A, b"x"))


def test_vlan_subinterface_traffic_arrives_tagged_on_parent(wire) -> None:
    require_kernel_feature(
        vlan_supported(),
        what="an 802.1Q sub-interface (ip link type vlan)",
        option="CONFIG_VLAN_8021Q",
        module="8021q",
    )
    wire.left.add_vlan(wire.veth.a, 10)
    with wire.left.entered():
        tx = RawSocket(f"{wire.veth.a}.10")
    wire.sockets.append(tx)
    rx = wire.open("b", groups=[GROUP_A])
    tx.send(frame(GROUP_A, b"via-vlan-if"))
    (got,) = read_until(rx, b"via-vlan-if")
    assert got.vlan is not None and got.vlan.vid == 10


_OPEN_LO = (
    "from goosectl.protocols.ethernet.rawsock import RawSocket, RawSocketPermissionError\n"
    "try:\n"
    "    RawSocket('lo')\n"
    "except RawSocketPermissionError as exc:\n"
    "    print('PERM', exc)\n"
    "else:\n"
    "    print('OPENED')\n"
)


def _without_net_raw() -> list[str]:
    """A command prefix that runs the child as root but without CAP_NET_RAW."""
    if shutil.which("capsh") and not shutil.which("setpriv"):
        return ["capsh", "--drop=cap_net_raw", "--"]
    return [require_binary("setpriv", "util-linux"), "--bounding-set=-net_raw", "--inh-caps=-all"]


def test_permission_error_without_cap_net_raw() -> None:
    if os.geteuid() != 0:
        with pytest.raises(RawSocketPermissionError, match="needs root or CAP_NET_RAW"):
            RawSocket("lo")
        return
    prefix = _without_net_raw()
    argv = [*prefix, sys.executable, "-c", _OPEN_LO]
    if prefix[0] == "capsh":
        argv = [*prefix, "-c", f'{sys.executable} -c "{_OPEN_LO}"']
    out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("PERM"), out.stdout + out.stderr
    assert "needs root or CAP_NET_RAW" in out.stdout
    assert "'lo'" in out.stdout
