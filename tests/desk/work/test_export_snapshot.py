"""An export copies its rows once into its own UNLOGGED table (desk/work/export_rows.py) and
builds its chunks from it in short transactions: no snapshot older than the copy is held while
it builds; an execution after a stopped one adopts its table and chunks (the file stays the
first copy's moment, every row once); a table emptied by a crash is copied again; the pruner
drops the tables of tasks that ended."""

from __future__ import annotations

import asyncio
import contextlib
import re

import psycopg
import pytest
import sqlalchemy as sa

from desk.work import export_rows, exports, tasks
from jobs import pruner
from jobs.execution import execute
from jobs.processors import export, registry
from tests.desk import slots
from tests.factories import add_ticket
from tests.helpers import wait_for


async def _scalar(rt, sql: str, params: dict | None = None):
    async with rt.engine.connect() as conn:
        return (await conn.execute(sa.text(sql), params or {})).scalar()


async def _tables(rt) -> list[str]:
    async with rt.engine.connect() as conn:
        q = sa.text(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'export\\_rows\\_%' ORDER BY 1"
        )
        return list((await conn.execute(q)).scalars())


async def _stored(rt, user, task_id) -> bytes:
    f = await tasks.open_export_result(rt, user, task_id)
    return b"".join([c async for c in f.chunks])


def _stopping_after(builds: int, counted: list[int]):
    """`build_slot` that counts the slots taken and, after `builds` of them, stops the export
    as a worker shutting down does (the task is handed back, its table and chunks stay), once."""
    build_slot = exports.build_slot
    stopped: list[bool] = []

    @contextlib.asynccontextmanager
    async def slot(conn, n: int, *, wait: bool):
        if len(counted) == builds and not stopped:
            stopped.append(True)
            raise asyncio.CancelledError()
        async with build_slot(conn, n, wait=wait) as held:
            counted.append(1)
            yield held

    return slot


async def _stopped_export(rt, world, monkeypatch, *, builds: int, counted: list[int]):
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 4)
    monkeypatch.setattr(export, "WRITERS", 1)
    for i in range(10):
        await add_ticket(rt, world.team, world.customer, f"Resumed {i}")
    task = await tasks.create_export(rt, world.staff, world.team, {"q": "Resumed"})
    monkeypatch.setattr(exports, "build_slot", _stopping_after(builds, counted))
    with pytest.raises(asyncio.CancelledError):
        await execute(rt, registry(), task.id, task.run)
    assert len(await _tables(rt)) == 1, "the stopped export's table stays"
    return task


async def test_the_next_execution_adopts_the_table_and_the_chunks(rt, world, monkeypatch):
    counted: list[int] = []
    task = await _stopped_export(rt, world, monkeypatch, builds=2, counted=counted)
    # After the copy: the file shows the tickets as they were then.
    await add_ticket(rt, world.team, world.customer, "Resumed late")
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET title = 'Resumed changed' WHERE title = 'Resumed 0'")
        )
    run = await _scalar(rt, "SELECT run FROM background_task WHERE id = :t", {"t": task.id})
    counted.clear()
    assert await execute(rt, registry(), task.id, run) == "done"
    # The third chunk (rows 9-10) built, and the last ask for a slot found no range left.
    assert len(counted) == 2, "the two adopted chunks were not built again"
    data = await _stored(rt, world.staff, task.id)
    assert data.count(b"Resumed ") == 10 and b"late" not in data and b"changed" not in data
    lines = data.split(b"\n")[1:-1]
    assert len(lines) == len(set(lines)) == 10, "every row once"
    done = await tasks.get_task(rt, world.staff, task.id)
    assert done.result_summary == "10 rows exported." and done.result_bytes == len(data)
    execs = await _scalar(
        rt, "SELECT array_agg(DISTINCT execution_id) FROM task_result_chunk WHERE task_id = :t",
        {"t": task.id},
    )  # fmt: skip
    eid = await _scalar(
        rt, "SELECT execution_id FROM background_task WHERE id = :t", {"t": task.id}
    )
    assert execs == [eid], "the adopted chunks were re-keyed to the committing execution"
    assert await _tables(rt) == [], "dropped once the file is stored"


async def test_a_table_emptied_by_a_crash_is_copied_again(rt, world, monkeypatch, settings):
    counted: list[int] = []
    task = await _stopped_export(rt, world, monkeypatch, builds=1, counted=counted)
    [name] = await _tables(rt)
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text(f"TRUNCATE {name}"))  # what a restart after a crash leaves
    await add_ticket(rt, world.team, world.customer, "Resumed late")
    run = await _scalar(rt, "SELECT run FROM background_task WHERE id = :t", {"t": task.id})
    counted.clear()
    assert await execute(rt, registry(), task.id, run) == "done"
    assert len(counted) == 3 + 1, "every chunk built again, from the new copy"
    data = await _stored(rt, world.staff, task.id)
    # The new copy's moment: the ticket made since is in, every row once.
    assert data == exports.HEADER + await _copy(settings, task)
    assert data.count(b"Resumed") == 11


async def _copy(settings, task) -> bytes:
    sql, params = exports.copy_sql(task)
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as conn:
        buf = bytearray()
        async with conn.cursor().copy(sql, params) as copy:
            async for data in copy:
                buf += data
    return bytes(buf)


async def test_vacuum_removes_what_died_while_an_export_builds(rt, settings, world, monkeypatch):
    """The export waits for a build slot after its copy: VACUUM removes rows that died since
    (the one REPEATABLE READ snapshot the whole file used to share kept them all)."""
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 4)
    for i in range(10):
        await add_ticket(rt, world.team, world.customer, f"Held {i}")
    other = await slots.hold(settings, range(rt.settings.export_build_slots))
    try:
        task = await tasks.create_export(rt, world.staff, world.team, {"q": "Held"})
        run = asyncio.ensure_future(execute(rt, registry(), task.id, task.run))
        await wait_for(lambda: slots.waiting(settings), timeout=30, what="waiting for a slot")
        # Measured again until it holds: a session of the run's other tests may hold a snapshot
        # for an instant; the export's own would hold it for as long as it waits (it never ends).
        await wait_for(lambda: _all_removable(settings), timeout=30, what="VACUUM to remove all")
        await other.execute("SELECT pg_advisory_unlock_all()")
        assert await asyncio.wait_for(run, 60) == "done"
    finally:
        await other.close()
    assert (await _stored(rt, world.staff, task.id)).count(b"Held") == 10


async def _all_removable(settings) -> bool:
    return await _dead_but_not_removable(settings) == 0


async def _dead_but_not_removable(settings) -> int:
    """Rows deleted now, then VACUUMed: how many it could not remove (a snapshot from before
    the delete still sees them). VACUUM's horizon is this database's sessions only."""
    said: list[str] = []
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as c:
        c.add_notice_handler(lambda d: said.append(d.message_primary or ""))
        await c.execute("DROP TABLE IF EXISTS scratch")
        await c.execute("CREATE TABLE scratch AS SELECT g FROM generate_series(1, 100) g")
        await c.execute("DELETE FROM scratch")
        await c.execute("VACUUM (VERBOSE) scratch")
    found = [re.search(r"(\d+) are dead but not yet removable", m) for m in said]
    [n] = [int(f.group(1)) for f in found if f]
    return n


async def test_the_pruner_drops_the_tables_of_ended_tasks_only(rt, world, monkeypatch):
    counted: list[int] = []
    task = await _stopped_export(rt, world, monkeypatch, builds=1, counted=counted)
    [waiting] = await _tables(rt)
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("CREATE UNLOGGED TABLE export_rows_999999_abc (rn bigint)"))
    await pruner.run_once(rt)
    assert await _tables(rt) == [waiting], "a task that may resume keeps its table"
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'FAILED', finished_at = now() WHERE id = :t"
            ),
            {"t": task.id},
        )
    await pruner.run_once(rt)
    assert await _tables(rt) == []
    assert export_rows.PREFIX == "export_rows_"
