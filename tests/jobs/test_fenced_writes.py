"""The worker's single-statement transitions on `rt.pg` (desk/ledger/run.py) keep their fences:
a stale execution changes nothing, a rescue ends the old execution's right to write, and a
statement repeated after a broken connection takes effect once."""

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.work import tasks
from jobs.execution import Execution, claim_task
from jobs.outcomes import DatabaseUnreachable
from tests.helpers import wait_for

NOW_EVENTS = "SELECT event FROM task_event WHERE task_id = :t ORDER BY id"


async def _events(rt, task_id: int) -> list[str]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(NOW_EVENTS), {"t": task_id})).scalars())


async def _row(rt, task_id: int) -> dict:
    found = await rt.pg.one("SELECT * FROM background_task WHERE id = %s", (task_id,))
    assert found is not None
    return found


async def _claimed(rt, world) -> tuple[ledger_run.Row, str]:
    task = await tasks.submit_noop(rt, world.staff, world.team, {})
    claimed = await claim_task(rt, task.id, task.run)
    assert claimed is not None
    return claimed


async def test_a_stale_execution_id_changes_nothing(rt, world, clock):
    row, eid = await _claimed(rt, world)
    before = await _row(rt, row.id)
    lease = timedelta(seconds=30)
    assert await ledger_run.complete(rt.pg, row.id, "stale", now=clock(), summary="no") is None
    assert not (await ledger_run.pulse(rt.pg, row.id, "stale", now=clock(), lease=lease)).alive
    assert (
        await ledger_run.fail(rt.pg, row.id, "stale", now=clock(), error="x", retry_at=None) is None
    )
    assert await ledger_run.release(rt.pg, row.id, "stale", now=clock()) is None
    assert await ledger_run.ack_cancel(rt.pg, row.id, "stale", now=clock()) is None
    assert await _row(rt, row.id) == before
    # The fence holds for the right id: the same statements do change the row.
    assert (await ledger_run.pulse(rt.pg, row.id, eid, now=clock(), lease=lease)).alive
    done = await ledger_run.complete(rt.pg, row.id, eid, now=clock(), summary="Done.")
    assert done is not None and done.status == "COMPLETED" and done.execution_id == eid


async def test_a_finish_after_a_rescue_took_the_lease_changes_nothing(rt, world, clock):
    row, eid = await _claimed(rt, world)
    clock.advance(rt.settings.lease_seconds + 1)
    async with rt.engine.begin() as conn:
        [rescued] = await ledger_upkeep.rescue(conn, now=clock(), limit=10)
    assert (rescued.status, rescued.run) == ("WAITING", 2)
    after_rescue = await _row(rt, row.id)

    assert await ledger_run.complete(rt.pg, row.id, eid, now=clock(), summary="late") is None
    lease = timedelta(seconds=30)
    assert not (await ledger_run.pulse(rt.pg, row.id, eid, now=clock(), lease=lease)).alive
    assert await ledger_run.fail(rt.pg, row.id, eid, now=clock(), error="x", retry_at=None) is None
    assert await ledger_run.release(rt.pg, row.id, eid, now=clock()) is None
    assert await _row(rt, row.id) == after_rescue
    assert await claim_task(rt, row.id, 1) is None, "the old round's message is stale"
    again = await claim_task(rt, row.id, 2)
    assert again is not None and again[0].attempts == 2


async def test_a_claim_or_finish_repeated_by_its_execution_takes_effect_once(rt, world, clock):
    task = await tasks.submit_noop(rt, world.staff, world.team, {})
    lease = timedelta(seconds=30)
    first = await ledger_run.claim(rt.pg, task.id, task.run, "e1", now=clock(), lease=lease)
    clock.advance(1)
    repeat = await ledger_run.claim(rt.pg, task.id, task.run, "e1", now=clock(), lease=lease)
    assert first is not None and repeat is not None
    assert (repeat.attempts, repeat.started_at) == (1, first.started_at), "counted once"
    assert await ledger_run.claim(rt.pg, task.id, task.run, "e2", now=clock(), lease=lease) is None

    done = await ledger_run.complete(rt.pg, task.id, "e1", now=clock(), summary="Done.")
    clock.advance(1)
    again = await ledger_run.complete(rt.pg, task.id, "e1", now=clock(), summary="Other.")
    assert done is not None and again == done, "the repeat answers with the row it wrote"
    assert await _events(rt, task.id) == ["accepted", "sent", "claimed", "completed"]


async def test_a_finish_cut_off_by_a_broken_connection_is_retried_and_finishes_once(
    rt, world, clock
):
    row, eid = await _claimed(rt, world)
    ex = Execution(rt, row, eid)
    await rt.pg.one("SELECT 1")  # the pool holds an open connection …
    async with rt.engine.connect() as conn:  # … which the server now closes, as in a restart
        killed = await conn.scalar(
            sa.text(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) "
                "FROM pg_stat_activity WHERE datname = current_database() "
                " AND pid <> pg_backend_pid()"
            )
        )
    assert killed >= 1
    tries: list[int] = []

    async def finish() -> ledger_run.Row | None:
        tries.append(1)
        return await ledger_run.complete(rt.pg, row.id, eid, now=clock(), summary="Done.")

    done = await ex.fenced(finish)
    assert len(tries) >= 2, "the first try met the broken connection"
    assert done is not None and done.status == "COMPLETED"
    assert (await _events(rt, row.id)).count("completed") == 1


async def test_a_renewal_that_commits_after_the_lease_ran_out_fails_the_attempt(rt, world):
    """A progress write held up past the lease (here by a row lock, in production by an
    outage) commits, but the execution takes it as the outage it was and stops."""
    row, eid = await _claimed(rt, world)
    ex = Execution(rt, row, eid)
    ex.lease = timedelta(seconds=0.5)  # a short lease, so the held lock outlasts it
    async with rt.engine.connect() as conn:
        held = await conn.begin()
        await conn.execute(
            sa.text("SELECT 1 FROM background_task WHERE id = :t FOR UPDATE"), {"t": row.id}
        )
        write = asyncio.create_task(ex.progress(current=1, total=2))

        async def lease_ran_out() -> bool:
            return ex.lease_left() <= 0

        await wait_for(lease_ran_out, what="the execution's lease to run out")
        assert not write.done(), "the progress write waits for the lock"
        await held.rollback()
    with pytest.raises(DatabaseUnreachable, match="after the lease ran out"):
        await write
    # A renewal within the lease goes on as before.
    again = Execution(rt, row, eid)
    await again.progress(current=2, total=2)
    assert (await _row(rt, row.id))["progress_current"] == 2
