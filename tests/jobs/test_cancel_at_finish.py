"""A cancel recorded after a running task's last progress write but before its finish (issue 24):
the finish sees it, the task ends CANCELLED with nothing kept and a row that says so. With a
real worker process, an export is held between its last progress write and its finish by the
database-wide build slots (desk.work.exports.build_slot), which the test takes turns with; in
this process, an import's and a NOOP's cancel is recorded just before their finish statement."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.errors import NotFound
from desk.imports import service as imports
from desk.ledger import run as ledger_run
from desk.work import exports, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.desk import slots
from tests.helpers import running_workers, wait_for
from tests.jobs.stall_helpers import rows

QUEUE = "SELECT pg_advisory_lock(%s, 0)"


async def _chunks(rt, task_id: int) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*) FROM task_result_chunk WHERE task_id = :t")
        return int((await conn.execute(q, {"t": task_id})).scalar_one())


async def _waiting_behind(settings, n: int) -> bool:
    return (await slots.queue(settings))[1] == n


async def _first_in_line(settings) -> bool:
    return (await slots.queue(settings))[0] == 1


async def _ended(rt, task_id: int):
    found = await rows(rt, [task_id])
    return found if found[0].status not in ("WAITING", "RUNNING") else None


@pytest.mark.slow  # starts a real worker process
async def test_a_cancel_after_the_last_progress_write_wins_over_the_finish(
    rt, world, settings, tmp_path
) -> None:
    rt.clock = utcnow
    # One build slot, held here: the export (one chunk) writes its first progress and then waits
    # in line for the slot. A lease of 300 s: no keep-alive writes in between.
    held = await slots.hold(settings, range(1))
    line = await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True)
    try:
        with running_workers(settings, tmp_path, export_build_slots=1, lease_seconds=300):
            task = await tasks.create_export(rt, world.staff, world.team, {})
            await wait_for(
                lambda: _first_in_line(settings), timeout=60, what="the export waiting for a slot"
            )
            # Queue behind it, then free the slot: it builds its chunk (and may write progress)
            # while this test is first in line, so its next ask for a slot, after its last
            # progress write and before its finish, waits for the test.
            queued = asyncio.ensure_future(line.execute(QUEUE, (exports.QUEUE_LOCK,)))
            await wait_for(lambda: _waiting_behind(settings, 1), timeout=30, what="in line")
            await held.execute("SELECT pg_advisory_unlock(%s, 0)", (exports.SLOT_LOCK,))
            await asyncio.wait_for(queued, 90)
            await wait_for(
                lambda: _waiting_behind(settings, 1), timeout=30, what="the export asking again"
            )
            [before] = await rows(rt, [task.id])
            assert before.status == "RUNNING" and not before.cancel_requested
            # Recorded at once, though the export's chunk transaction holds a key-share lock on
            # the row (tests/desk/ledger/test_accept.py).
            asked = await asyncio.wait_for(tasks.cancel_task(rt, world.staff, task.id), 60)
            assert asked.status == "RUNNING" and asked.cancel_requested
            await line.close()  # the export goes on to its finish
            [row] = await wait_for(
                lambda: _ended(rt, task.id), timeout=60, what="the export's finish"
            )
    finally:
        await held.close()
        await line.close()
    assert row.status == "CANCELLED", row.result_summary
    assert row.summary_key == "export.cancelled_at_finish"
    assert row.result_summary == "Cancelled while finishing; the file was discarded."
    assert row.result_bytes is None and row.expires_at is None
    assert await _chunks(rt, task.id) == 0, "the stored CSV was deleted"
    with pytest.raises(NotFound):
        await tasks.open_export_result(rt, world.staff, task.id)


def _cancel_just_before_the_finish(rt, monkeypatch, who: int) -> None:
    """The person's cancel commits after the processor's last progress write, right before its
    finish statement runs (in the finish's own transaction, for an import)."""
    finish = ledger_run.complete

    async def cancelled_first(db, task_id, execution_id, **fields):
        asked = await tasks.cancel_task(rt, who, task_id)
        assert asked.status == "RUNNING" and asked.cancel_requested
        return await finish(db, task_id, execution_id, **fields)

    monkeypatch.setattr(ledger_run, "complete", cancelled_first)


async def test_an_import_cancelled_before_its_finish_keeps_its_rows_and_says_so(
    rt, world, monkeypatch
) -> None:
    data = b"external_id,title,status,priority,assignee_email,creator_email\nK-1,Kept,OPEN,LOW,,\n"
    upload = await imports.store_upload(rt, world.admin, world.team, "k.csv", data)
    task = await imports.start_import(rt, world.admin, world.team, upload.id, "create")
    _cancel_just_before_the_finish(rt, monkeypatch, world.admin)
    assert await execute(rt, registry(), task.id, task.run) == "cancelled"
    [row] = await rows(rt, [task.id])
    assert (row.status, row.summary_key) == ("CANCELLED", "import.cancelled_at_finish")
    assert row.result_summary == "Cancelled while finishing; the rows already imported stay."
    assert row.stats["created"] == 1, "the counts of what was imported stay"
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*) FROM ticket WHERE title = 'Kept'")
        assert (await conn.execute(q)).scalar_one() == 1


async def test_a_noop_cancelled_before_its_finish_ends_cancelled(rt, world, monkeypatch) -> None:
    task = await tasks.submit_noop(rt, world.staff, world.team, {"steps": 2, "step_seconds": 0})
    _cancel_just_before_the_finish(rt, monkeypatch, world.staff)
    assert await execute(rt, registry(), task.id, task.run) == "cancelled"
    [row] = await rows(rt, [task.id])
    assert (row.status, row.summary_key) == ("CANCELLED", "noop.cancelled_at_finish")
    assert row.progress_current == 2 and row.progress == 1.0
