"""Fixtures of the fleet tests: the real brokers, started per module (a cluster takes
seconds to elect its leaders), stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fleet.brokers import NatsCluster, running_cluster


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    with running_cluster(tmp_path_factory.mktemp("nats")) as cluster:
        yield cluster
