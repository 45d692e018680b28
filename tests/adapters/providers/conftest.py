from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentfsm.testing import FakeProviderServer


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running
