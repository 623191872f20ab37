"""Stored export chunks are compressed with lz4 by the column's own setting (migration 0010),
where the server supports it: the worker no longer asks for it in every chunk's transaction."""

from __future__ import annotations

import sqlalchemy as sa

from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import bulk_tickets


async def test_export_chunks_are_stored_with_lz4(rt, world) -> None:
    async with rt.engine.connect() as conn:
        lz4 = (
            await conn.execute(
                sa.text(
                    "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                    "WHERE name = 'default_toast_compression'"
                )
            )
        ).scalar_one()
    await bulk_tickets(rt, world.team, world.customer, 3000)
    task = await tasks.create_export(rt, world.staff, world.team, {})
    assert await execute(rt, registry(), task.id, task.run) == "done"
    async with rt.engine.connect() as conn:
        methods = (
            (
                await conn.execute(
                    sa.text(
                        "SELECT DISTINCT pg_column_compression(data) FROM task_result_chunk "
                        "WHERE task_id = :t"
                    ),
                    {"t": task.id},
                )
            )
            .scalars()
            .all()
        )
    assert methods == (["lz4"] if lz4 else ["pglz"])
