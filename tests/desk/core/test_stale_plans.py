"""A migration that adds a column under running processes (docs/architecture.md, "Migrations"):
their prepared `SELECT *` statements go stale, and PostgreSQL refuses them ("cached plan must
not change result type") until the session forgets them. Both ways to the database get past it:
the pool's autocommit statements (desk/core/pg.py) run once more after forgetting, and a
transaction is transient (desk/core/db.py), so `retrying` runs it again after the rollback."""

from __future__ import annotations

import psycopg
import sqlalchemy as sa

from desk.core.db import is_transient, retrying, stale_plan
from desk.core.runtime import Runtime
from tests.factories import World

READ = "SELECT * FROM team WHERE id = %(id)s"
RUNS = 40  # more than psycopg's prepare threshold (5) on every pooled connection


def _add_column(url: str, name: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE team ADD COLUMN {name} integer")


async def test_autocommit_reads_survive_a_column_added_under_them(
    rt: Runtime, world: World
) -> None:
    for _ in range(RUNS):
        assert await rt.pg.one(READ, {"id": world.team})
    _add_column(rt.settings.libpq_url, "extra_read")
    for _ in range(RUNS):  # each pooled connection meets its stale plan once
        row = await rt.pg.one(READ, {"id": world.team})
        assert row is not None and "extra_read" in row


async def test_autocommit_writes_survive_a_column_added_under_them(
    rt: Runtime, world: World
) -> None:
    write = "UPDATE team SET name = name WHERE id = %(id)s RETURNING *"
    for _ in range(RUNS):
        assert await rt.pg.write(write, {"id": world.team})
    _add_column(rt.settings.libpq_url, "extra_write")
    for _ in range(RUNS):
        (written,) = await rt.pg.write(write, {"id": world.team})
        assert "extra_write" in written


async def test_a_transaction_meeting_a_stale_plan_is_run_again(rt: Runtime, world: World) -> None:
    query = sa.text("SELECT * FROM team WHERE id = :id")

    async def read() -> dict:
        async with rt.engine.begin() as conn:
            return dict((await conn.execute(query, {"id": world.team})).one()._mapping)

    for _ in range(RUNS):
        await read()
    _add_column(rt.settings.libpq_url, "extra_two")
    seen = []
    for _ in range(RUNS):
        try:
            seen.append(await read())
        except Exception as exc:  # what `retrying` is for: say so, then let it run again
            assert stale_plan(exc) and is_transient(exc), exc
            seen.append(await retrying(read))
    assert all("extra_two" in row for row in seen)
