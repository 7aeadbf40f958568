"""The peer rule itself: a missing peer skips on a developer's machine and fails in CI,
except a kernel built without the feature, which no package CI installs can add."""

from __future__ import annotations

import pytest

from tests.support import peers

VLAN = {"what": "an 802.1Q sub-interface", "option": "CONFIG_VLAN_8021Q", "module": "8021q"}


def test_a_kernel_built_without_the_option_skips_even_in_ci(monkeypatch) -> None:
    monkeypatch.setenv("GOOSECTL_REQUIRE_PEERS", "1")
    monkeypatch.setattr(peers, "_kernel_config", lambda: {"CONFIG_NET": "y"})
    with pytest.raises(pytest.skip.Exception, match=r"module 8021q.*CONFIG_VLAN_8021Q"):
        peers.require_kernel_feature(False, **VLAN)


@pytest.mark.parametrize(
    "config", [{"CONFIG_VLAN_8021Q": "m", "CONFIG_MODULES": "y"}, None], ids=["module", "unknown"]
)
def test_a_loadable_or_unknown_module_fails_in_ci(monkeypatch, config) -> None:
    monkeypatch.setenv("GOOSECTL_REQUIRE_PEERS", "1")
    monkeypatch.setattr(peers, "_kernel_config", lambda: config)
    with pytest.raises(pytest.fail.Exception, match="modprobe 8021q"):
        peers.require_kernel_feature(False, **VLAN)


def test_a_loadable_module_skips_on_a_developer_machine(monkeypatch) -> None:
    monkeypatch.delenv("GOOSECTL_REQUIRE_PEERS", raising=False)
    monkeypatch.setattr(peers, "_kernel_config", lambda: {"CONFIG_VLAN_8021Q": "m"})
    with pytest.raises(pytest.skip.Exception, match="modprobe 8021q"):
        peers.require_kernel_feature(False, **VLAN)


def test_a_missing_binary_fails_in_ci(monkeypatch) -> None:
    monkeypatch.setenv("GOOSECTL_REQUIRE_PEERS", "1")
    with pytest.raises(pytest.fail.Exception, match=r"no-such-peer.*Debian package nope"):
        peers.require_binary("no-such-peer", "nope")


def test_a_tool_in_sbin_is_found_when_path_leaves_sbin_out(monkeypatch, tmp_path) -> None:
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    tool = sbin / "tc"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(peers, "SYSTEM_BIN", (str(tmp_path / "usr-sbin"), str(sbin)))
    monkeypatch.delenv("GOOSECTL_REQUIRE_PEERS", raising=False)
    assert peers.require_binary("tc", "iproute2") == str(tool)
