"""Fixtures shared by the worker's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from taskdesk.embedded import RedisServer


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of the test's own (no persistence), for tests that stop, flush or count it."""
    server = RedisServer(tmp_path / "redis", persist=False)
    server.start()
    yield server
    server.stop()
