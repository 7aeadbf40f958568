"""Fixtures of the PRP tests: a fresh network lab (namespaces, veth pairs; root)."""

from tests.support.netns import netlab_fixture

netlab = netlab_fixture()
