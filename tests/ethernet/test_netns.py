"""The namespace helper creates what it says and always removes it (needs root)."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from goosectl.lab import netns
from goosectl.lab.netns import NetLab, cleanup_stale, ip, list_namespaces, netlab
from tests.support.peers import require_root

pytestmark = pytest.mark.root


def _leftovers(lab: NetLab) -> list[str]:
    """Namespaces and root links of this lab still present (other sessions' are ignored)."""
    mine = f"{lab.prefix}{lab.tag}-"
    return list_namespaces(mine) + netns.list_root_links(mine)


def _ip_netns_list() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_namespaces_and_links_exist_then_vanish() -> None:
    require_root()
    with netlab() as lab:
        left, right = lab.namespace(), lab.namespace()
        pair = lab.veth(left, right)
        root_pair = lab.veth(None, right, b="up0")
        assert left.name.startswith("gctl-") and left.name != right.name
        assert left.name in _ip_netns_list() and right.name in _ip_netns_list()
        assert pair.a in left.links() and {pair.b, "up0"} <= set(right.links())
        assert Path(f"/sys/class/net/{root_pair.a}").exists()
        assert root_pair.a.startswith("gctl-")
        assert "state UP" in left.ip("link", "show", pair.a).stdout or "LOWER_UP" in (
            left.ip("link", "show", pair.a).stdout
        )
    assert _leftovers(lab) == []
    assert left.name not in _ip_netns_list()


def test_cleanup_on_error_and_on_keyboard_interrupt() -> None:
    require_root()
    for exc in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), netlab() as lab:
            ns = lab.namespace()
            lab.veth(None, ns)
            raise exc
        assert _leftovers(lab) == []


def test_processes_inside_are_stopped_on_exit() -> None:
    require_root()
    with netlab() as lab:
        ns = lab.namespace()
        proc = ns.popen([sys.executable, "-c", "import time; time.sleep(600)"])
        assert proc.poll() is None
    assert proc.poll() is not None
    assert _leftovers(lab) == []


def test_python_runs_inside_the_namespace(netlab: NetLab) -> None:
    ns = netlab.namespace()
    netlab.veth(ns, ns, a="in0", b="in1")
    out = ns.python("import socket; print(sorted(n for _, n in socket.if_nameindex()))")
    assert out.stdout.strip() == "['in0', 'in1', 'lo']"
    failing = ns.python("raise SystemExit(3)", check=False)
    assert failing.returncode == 3
    with pytest.raises(netns.NetnsError, match="exit 1"):
        ns.python("import sys; sys.exit('bad')")


def test_entered_moves_only_this_thread_and_back(netlab: NetLab) -> None:
    ns = netlab.namespace()
    netlab.veth(ns, ns, a="in0", b="in1")
    outside = {n for _, n in socket.if_nameindex()}
    with ns.entered():
        inside = {n for _, n in socket.if_nameindex()}
    assert inside == {"lo", "in0", "in1"}
    assert {n for _, n in socket.if_nameindex()} == outside


def test_link_down_up(netlab: NetLab) -> None:
    a, b = netlab.namespace(), netlab.namespace()
    pair = netlab.veth(a, b, a="x0", b="y0")
    pair.set("b", False)
    assert "state DOWN" in b.ip("link", "show", "y0").stdout
    assert "NO-CARRIER" in a.ip("link", "show", "x0").stdout
    pair.set("b", True)
    assert ",UP" in b.ip("link", "show", "y0").stdout


def test_bad_names_and_failed_commands_are_clear(netlab: NetLab) -> None:
    ns = netlab.namespace()
    with pytest.raises(netns.NetnsError, match="longer than 15"):
        netlab.veth(ns, ns, a="a" * 16, b="b0")
    with pytest.raises(netns.NetnsError, match=r"`ip -n .* link set nope0 up` failed"):
        ns.link_set("nope0", True)
    with pytest.raises(netns.NetnsError, match="at least one end"):
        netlab.veth(None, None)


def test_vlan_subinterface_or_clear_refusal(netlab: NetLab) -> None:
    ns = netlab.namespace()
    netlab.veth(ns, ns, a="p0", b="p1")
    if netns.vlan_supported():
        assert ns.add_vlan("p0", 10) == "p0.10"
        assert "p0.10" in ns.links()
    else:
        with pytest.raises(netns.VlanUnsupportedError, match=r"p0.10.*8021q"):
            ns.add_vlan("p0", 10)


def test_cleanup_stale_removes_leftovers_with_the_prefix() -> None:
    require_root()
    prefix = f"gctl-st{secrets.token_hex(2)}"  # private prefix: never touches other runs
    ip("netns", "add", f"{prefix}-ns")
    ip("link", "add", f"{prefix}-l", "type", "veth", "peer", "name", f"{prefix}-p")
    try:
        removed = cleanup_stale(prefix)
        assert f"{prefix}-ns" in removed and f"{prefix}-l" in removed
        assert list_namespaces(prefix) == [] and netns.list_root_links(prefix) == []
    finally:
        cleanup_stale(prefix)
