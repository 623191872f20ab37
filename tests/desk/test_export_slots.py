"""The export build budget (EXPORT_BUILD_SLOTS) lives in the database, so every worker process
sees it: a build slot held by another session (another worker's chunk build) holds back this
export; a slot is freed even when the build fails; two worker processes share one budget."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.work import exports, tasks
from jobs.execution import execute
from jobs.processors import export, registry
from tests.factories import add_ticket, bulk_tickets
from tests.helpers import running_workers, wait_for

_OURS = f"""locktype = 'advisory' AND classid = {exports.SLOT_LOCK}
    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"""
_SLOTS = f"""SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
    FROM pg_locks WHERE {_OURS}"""
_QUEUED = f"SELECT objid FROM pg_locks WHERE {_OURS} AND NOT granted"


async def _slots(settings) -> tuple[int, int]:
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as c:
        held, waiting = await (await c.execute(_SLOTS)).fetchone()  # type: ignore[misc]
    return int(held), int(waiting)


async def _chunks(rt, task_id) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*) FROM task_result_chunk WHERE task_id = :t")
        return int((await conn.execute(q, {"t": task_id})).scalar_one())


async def _hold(settings, slots: range) -> psycopg.AsyncConnection:
    """Another session (as another worker's builds would) holding these slots."""
    other = await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True)
    for s in slots:
        await other.execute("SELECT pg_advisory_lock(%s, %s)", (exports.SLOT_LOCK, s))
    return other


async def test_an_export_waits_while_every_slot_is_held_elsewhere(rt, settings, world, monkeypatch):
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 4)
    for i in range(10):
        await add_ticket(rt, world.team, world.customer, f"Slot {i}")
    other = await _hold(settings, range(rt.settings.export_build_slots))
    try:
        task = await tasks.create_export(rt, world.staff, world.team, {"q": "Slot"})
        run = asyncio.ensure_future(execute(rt, registry(), task.id, task.run))
        await wait_for(
            lambda: _waiting(settings), timeout=30, what="the export waiting for a build slot"
        )
        assert not run.done() and await _chunks(rt, task.id) == 0, "no chunk built without a slot"
        # Free the slot it queued on (the other stays held: it runs with one writer).
        await other.execute(
            "SELECT pg_advisory_unlock(%s, %s)", (exports.SLOT_LOCK, await _queued(settings))
        )
        assert await asyncio.wait_for(run, 60) == "done"
    finally:
        await other.close()
    done = await tasks.get_task(rt, world.staff, task.id)
    assert done.progress_current == 10 and await _chunks(rt, task.id) == 3
    assert await _slots(settings) == (0, 0), "every slot is given back"


async def _queued(settings) -> int:
    """The slot a writer waits for."""
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as c:
        return int((await (await c.execute(_QUEUED)).fetchone())[0])  # type: ignore[index]


async def _waiting(settings) -> bool:
    return (await _slots(settings))[1] > 0


async def test_a_failed_build_gives_its_slot_back(rt, settings, world, monkeypatch):
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 2)
    for i in range(6):
        await add_ticket(rt, world.team, world.customer, f"Broken {i}")
    chunk_sql = exports.chunk_sql

    def failing(task):
        sql, params = chunk_sql(task)
        # The second range on fails inside PostgreSQL, mid-transaction.
        return sql.replace(
            "SELECT b.n", "SELECT b.n / (CASE WHEN :x_seq > 0 THEN 0 ELSE 1 END)"
        ), params

    monkeypatch.setattr(exports, "chunk_sql", failing)
    task = await tasks.create_export(rt, world.staff, world.team, {"q": "Broken"})
    assert await execute(rt, registry(), task.id, task.run) != "done"
    assert await _chunks(rt, task.id) == 0, "a failed export leaves no chunk behind"
    assert await _slots(settings) == (0, 0), "the failed writer's slot is free again"


@pytest.mark.parametrize("slots", [1, 2])
def test_build_slots_setting_is_validated(slots):
    from desk.core.settings import ConfigError, load_settings

    assert load_settings(export_build_slots=slots).export_build_slots == slots
    with pytest.raises(ConfigError, match="EXPORT_BUILD_SLOTS"):
        load_settings(export_build_slots=0)


async def test_two_worker_processes_share_one_budget(rt, settings, world, tmp_path):
    """One slot, two workers of one long slot each (so one export per worker). While another
    session holds the slot, both workers' exports queue for it in PostgreSQL (two processes
    waiting on one database-wide budget); once it is free, the builds take turns across the
    processes, never two slots held at once, and both exports complete."""
    rt.clock = utcnow
    await bulk_tickets(rt, world.team, world.customer, 50_000)
    env = {"export_build_slots": 1, "worker_long_slots": 1}
    other = await _hold(settings, range(1))
    try:
        with running_workers(settings, tmp_path, count=2, **env):
            first = await tasks.create_export(rt, world.staff, world.team, {})
            second = await tasks.create_export(rt, world.staff, world.team, {"q": "a"})
            await wait_for(
                lambda: _waiting_at_least(settings, 2),
                timeout=120,
                what="both workers' exports waiting for the one build slot",
            )
            await other.execute("SELECT pg_advisory_unlock(%s, 0)", (exports.SLOT_LOCK,))
            seen: list[int] = []

            async def completed() -> bool:
                seen.append((await _slots(settings))[0])  # slots held, sampled meanwhile
                return await _all_completed(rt, (first.id, second.id))

            await wait_for(completed, timeout=120, interval=0.005, what="both exports completed")
    finally:
        await other.close()
    assert max(seen) <= 1, "one build slot for both worker processes"
    assert await _slots(settings) == (0, 0)


async def _waiting_at_least(settings, n: int) -> bool:
    return (await _slots(settings))[1] >= n


async def _all_completed(rt, ids) -> bool:
    async with rt.engine.connect() as conn:
        q = sa.text(
            "SELECT count(*) FROM background_task WHERE id = ANY(:i) AND status = 'COMPLETED'"
        )
        done = int((await conn.execute(q, {"i": list(ids)})).scalar_one())
    if done < len(ids):
        async with rt.engine.connect() as conn:
            q = sa.text(
                "SELECT count(*) FROM background_task WHERE id = ANY(:i) AND status = 'FAILED'"
            )
            assert not (await conn.execute(q, {"i": list(ids)})).scalar_one(), "an export failed"
    return done == len(ids)
