"""The pytest fixture for network namespaces; the lab itself is `lab.netns`
(the product's `demo --live` and `bench --live` use it too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from lab.netns import NetLab, netlab
from tests.support.peers import require_root


def netlab_fixture(*, scope: str = "function", name: str | None = None) -> Callable:
    """Make a pytest fixture yielding a fresh `NetLab` (skips without root; CI fails).

    In a conftest: ``netlab = netlab_fixture()`` or
    ``shared_lab = netlab_fixture(scope="module", name="shared_lab")``.
    """

    @pytest.fixture(scope=scope, name=name)
    def _fixture() -> Iterator[NetLab]:
        require_root()
        with netlab() as lab:
            yield lab

    return _fixture
