"""Fixtures of the fleet tests: the real brokers, started per module (a cluster takes
seconds to elect its leaders), stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fleet.brokers import NatsCluster


@pytest.fixture(scope="module")
def nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsCluster]:
    cluster = NatsCluster(tmp_path_factory.mktemp("nats"))
    cluster.start()
    try:
        cluster.ready()
        yield cluster
    finally:
        cluster.stop()
