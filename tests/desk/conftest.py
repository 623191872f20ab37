"""Fixtures of the desk tests."""

from __future__ import annotations

import pytest

from desk.core.runtime import Runtime
from tests.desk.visibility import make_ledger
from tests.factories import World


@pytest.fixture
async def ledger(rt: Runtime, world: World) -> dict[tuple[str, str], int]:
    """One task of every kind owned by each Acme person: (kind, owner) -> id."""
    return await make_ledger(rt, world)
