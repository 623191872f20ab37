"""Transient database errors are classified in one place and the transaction runs again."""

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from desk.core.db import is_transient, retrying

RAISE = "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '{code}'; END $$"


async def _raise(engine, code: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(sa.text(RAISE.format(code=code)))


@pytest.mark.parametrize(
    "code,transient", [("40001", True), ("40P01", True), ("23505", False), ("22P02", False)]
)
async def test_classification_of_real_errors(engine, code, transient):
    with pytest.raises(DBAPIError) as err:
        await _raise(engine, code)
    assert is_transient(err.value) is transient


async def test_transient_error_is_retried_then_succeeds(engine):
    calls = []

    async def once():
        calls.append(1)
        if len(calls) < 3:
            await _raise(engine, "40001")
        async with engine.connect() as conn:
            return (await conn.execute(sa.text("SELECT 42"))).scalar_one()

    assert await retrying(once) == 42 and len(calls) == 3


async def test_other_errors_are_not_retried(engine):
    calls = []

    async def once():
        calls.append(1)
        await _raise(engine, "23505")

    with pytest.raises(DBAPIError):
        await retrying(once)
    assert len(calls) == 1
