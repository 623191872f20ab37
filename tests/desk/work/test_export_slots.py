"""The export build budget (EXPORT_BUILD_SLOTS) lives in the database, so every worker process
sees it: a build slot held by another session (another worker's chunk build) holds back this
export; a slot is freed even when the build fails; two worker processes share one budget."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.work import exports, tasks
from jobs.execution import execute
from jobs.processors import export, registry
from tests.desk import slots
from tests.factories import add_ticket, bulk_tickets
from tests.helpers import running_workers, wait_for


async def _chunks(rt, task_id) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*) FROM task_result_chunk WHERE task_id = :t")
        return int((await conn.execute(q, {"t": task_id})).scalar_one())


async def test_an_export_waits_while_every_slot_is_held_elsewhere(rt, settings, world, monkeypatch):
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 4)
    for i in range(10):
        await add_ticket(rt, world.team, world.customer, f"Slot {i}")
    other = await slots.hold(settings, range(rt.settings.export_build_slots))
    try:
        task = await tasks.create_export(rt, world.staff, world.team, {"q": "Slot"})
        run = asyncio.ensure_future(execute(rt, registry(), task.id, task.run))
        await wait_for(
            lambda: slots.waiting(settings), timeout=30, what="the export waiting for a build slot"
        )
        assert not run.done() and await _chunks(rt, task.id) == 0, "no chunk built without a slot"
        # Free one slot (the other stays held: it runs with one writer).
        await other.execute("SELECT pg_advisory_unlock(%s, 0)", (exports.SLOT_LOCK,))
        assert await asyncio.wait_for(run, 60) == "done"
    finally:
        await other.close()
    done = await tasks.get_task(rt, world.staff, task.id)
    assert done.progress_current == 10 and await _chunks(rt, task.id) == 3
    assert await slots.slots(settings) == (0, 0), "every slot is given back"


async def test_a_waiter_takes_the_first_slot_that_frees(rt, settings):
    """Every slot is held elsewhere; one frees while the others stay held for long (as a build
    in another export, or this export's own caller, may hold them): the waiting writer takes it,
    whichever it is, instead of waiting on one chosen slot."""
    n = 4
    other = await slots.hold(settings, range(n))
    try:
        async with rt.engine.connect() as conn:

            async def build() -> None:
                async with exports.build_slot(conn, n, wait=True) as held:
                    assert held

            run = asyncio.ensure_future(build())
            await wait_for(lambda: slots.waiting(settings), timeout=30, what="a writer waiting")
            # A slot nobody waits for by number: a wait on one chosen slot would never end here.
            free = max(set(range(n)) - await slots.queued_on(settings))
            await other.execute("SELECT pg_advisory_unlock(%s, %s)", (exports.SLOT_LOCK, free))
            await asyncio.wait_for(run, 10)
    finally:
        await other.close()
    assert await slots.slots(settings) == (0, 0)
    assert await slots.waiters(settings) == 0


async def test_a_writer_asking_again_queues_behind_a_waiter(rt, settings):
    """One slot: A builds, B waits; A frees the slot and asks again at once. B builds next."""
    order: list[str] = []
    b_may_finish = asyncio.Event()
    async with rt.engine.connect() as a, rt.engine.connect() as b:

        async def build(name: str, conn, until: asyncio.Event | None = None) -> None:
            async with exports.build_slot(conn, 1, wait=True) as held:
                assert held
                order.append(name)
                if until is not None:
                    await until.wait()

        async with exports.build_slot(a, 1, wait=True) as held:
            assert held
            order.append("a")
            waiter = asyncio.ensure_future(build("b", b, b_may_finish))
            await wait_for(lambda: slots.waiting(settings), timeout=30, what="B waiting")
        again = asyncio.ensure_future(build("a", a))
        await wait_for(lambda: _has(order, 2), timeout=10, what="B building")
        b_may_finish.set()
        await asyncio.wait_for(asyncio.gather(waiter, again), 10)
    assert order == ["a", "b", "a"]


async def _has(order: list[str], n: int) -> bool:
    return len(order) >= n


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
    # The writer's backend ends (desk.core.db.end_backend); PostgreSQL frees its locks as the
    # backend exits, a moment after the connection closes.
    await wait_for(
        lambda: _freed(settings), timeout=30, what="the failed writer's slot to be free again"
    )


async def _freed(settings) -> bool:
    return await slots.slots(settings) == (0, 0)


@pytest.mark.parametrize("count", [1, 2])
def test_build_slots_setting_is_validated(count):
    from desk.core.settings import ConfigError, load_settings

    assert load_settings(export_build_slots=count).export_build_slots == count
    with pytest.raises(ConfigError, match="EXPORT_BUILD_SLOTS"):
        load_settings(export_build_slots=0)


@pytest.mark.slow
async def test_two_worker_processes_share_one_budget(rt, settings, world, tmp_path):
    """One slot, two workers of one long slot each (so one export per worker). While another
    session holds the slot, both workers' exports queue for it in PostgreSQL (two processes
    waiting on one database-wide budget); once it is free, the builds take turns across the
    processes, never two slots held at once, and both exports complete."""
    rt.clock = utcnow
    await bulk_tickets(rt, world.team, world.customer, 50_000)
    env = {"export_build_slots": 1, "worker_long_slots": 1}
    other = await slots.hold(settings, range(1))
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
                seen.append((await slots.slots(settings))[0])  # slots held, sampled meanwhile
                return await _all_completed(rt, (first.id, second.id))

            await wait_for(completed, timeout=120, interval=0.005, what="both exports completed")
    finally:
        await other.close()
    assert max(seen) <= 1, "one build slot for both worker processes"
    assert await slots.slots(settings) == (0, 0)


async def _waiting_at_least(settings, n: int) -> bool:
    return await slots.waiters(settings) >= n


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
