"""A cancel recorded while a task runs is honoured by every ending (issue 24): a finish, one row's
or a batch's, turns CANCELLED and keeps nothing; a failed attempt ends CANCELLED instead of
waiting for a round no claim would take; and the cancel is recorded at once even while an
export's chunk transaction holds its row."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.models import TaskKind
from desk.ledger import accept as ledger
from desk.ledger import finish
from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.work import reminders, tasks

LEASE = timedelta(seconds=30)


async def _claimed(rt, task, eid="e1"):
    return await ledger_run.claim(rt.pg, task.id, task.run, eid, now=rt.clock(), lease=LEASE)


async def _cancel(rt, task_id: int) -> None:
    async with rt.engine.begin() as conn:
        asked = await ledger.cancel(conn, task_id, now=rt.clock())
    assert asked.status == "RUNNING" and asked.cancel_requested


async def _chunk(conn, task_id: int, execution_id: str) -> None:
    """A stored chunk of the file, as an export's run leaves it."""
    await conn.execute(
        sa.text(
            "INSERT INTO task_result_chunk (task_id, execution_id, seq, data) "
            "VALUES (:t, :e, 0, :d)"
        ),
        {"t": task_id, "e": execution_id, "d": b"id,title\n"},
    )


async def _chunks(rt, task_id: int) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*) FROM task_result_chunk WHERE task_id = :t")
        return int((await conn.execute(q, {"t": task_id})).scalar_one())


def test_every_kind_says_what_a_cancelled_finish_did() -> None:
    assert set(finish.CANCELLED_AT_FINISH) == {k.value for k in TaskKind}
    said = finish.CANCELLED_AT_FINISH["EXPORT"]
    assert said.text == "Cancelled while finishing; the file was discarded."


async def test_a_finish_after_a_recorded_cancel_ends_cancelled_and_drops_the_file(
    rt, world, clock
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    await _claimed(rt, task)
    async with rt.engine.begin() as conn:
        await _chunk(conn, task.id, "e1")
        await ledger_run.pulse(conn, task.id, "e1", now=clock(), lease=LEASE, current=4, total=4)
    await _cancel(rt, task.id)  # after the last progress write
    clock.advance(1)
    async with rt.engine.begin() as conn:
        done = await ledger_run.complete(
            conn, task.id, "e1", now=clock(), summary="4 rows exported.", summary_key="export.done",
            summary_params={"rows": 4}, expires_at=clock() + timedelta(hours=24), result_bytes=9,
            current=4,
        )  # fmt: skip
    assert (done.status, done.summary_key, done.summary_params) == (
        "CANCELLED",
        "export.cancelled_at_finish",
        {},
    )
    assert done.result_summary == "Cancelled while finishing; the file was discarded."
    assert done.result_bytes is None and done.expires_at is None and not done.result_skipped
    assert done.finished_at == clock() and done.lease_until is None
    assert await _chunks(rt, task.id) == 0, "the stored CSV went with the same statement"
    async with rt.engine.begin() as conn:
        again = await ledger_run.complete(conn, task.id, "e1", now=clock(), summary="again")
    assert again is None, "a repeat changes nothing (and its caller discards)"


@pytest.mark.parametrize("kind", ["NOOP", "REMINDER"])
async def test_each_kind_finishes_cancelled_with_its_own_words(rt, world, clock, kind) -> None:
    if kind == "NOOP":
        task = await tasks.submit_noop(rt, world.staff, world.team, {})
    else:
        ticket = world.tickets["login"]
        task = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=1)
    await _claimed(rt, task)
    await _cancel(rt, task.id)
    done = await ledger_run.complete(rt.pg, task.id, "e1", now=clock(), summary="Done.")
    assert done.status == "CANCELLED"
    assert done.summary_key == f"{kind.lower()}.cancelled_at_finish"
    assert done.result_summary == finish.CANCELLED_AT_FINISH[kind].text


async def test_a_batch_finish_cancels_only_the_rows_asked_to_stop(rt, world, clock) -> None:
    kept = await tasks.submit_noop(rt, world.staff, world.team, {})
    stopped = await tasks.submit_noop(rt, world.staff, world.team, {})
    await _claimed(rt, kept, "ek")
    await _claimed(rt, stopped, "es")
    await _cancel(rt, stopped.id)
    endings = [
        ledger_upkeep.Ending(t.id, eid, "Done.", False, "noop.done")
        for t, eid in ((kept, "ek"), (stopped, "es"))
    ]
    done = {r.id: r for r in await ledger_upkeep.complete_many(rt.pg, endings, now=clock())}
    assert (done[kept.id].status, done[kept.id].result_summary) == ("COMPLETED", "Done.")
    assert done[kept.id].progress == 1
    assert done[stopped.id].status == "CANCELLED"
    assert done[stopped.id].summary_key == "noop.cancelled_at_finish"


@pytest.mark.parametrize("retry", [True, False])
async def test_a_failed_attempt_after_a_recorded_cancel_ends_cancelled(
    rt, world, clock, retry
) -> None:
    task = await tasks.submit_noop(rt, world.staff, world.team, {})
    await _claimed(rt, task)
    await _cancel(rt, task.id)
    retry_at = clock() + timedelta(seconds=5) if retry else None
    ended = await ledger_run.fail(
        rt.pg, task.id, "e1", now=clock(), error="boom", retry_at=retry_at
    )
    # Re-armed, it would wait for ever: no claim takes a row whose cancel was asked for.
    assert (ended.status, ended.run, ended.last_error) == ("CANCELLED", task.run, "boom")
    assert ended.finished_at == clock()


async def test_a_cancel_is_recorded_at_once_while_an_export_stores_its_chunks(
    rt, world, clock
) -> None:
    """An export's chunk transaction holds a key-share lock on its task row (the chunks' foreign
    key) until the whole file is stored: neither a person's nor the console's cancel waits."""
    task = await tasks.create_export(rt, world.staff, world.team, {})
    await _claimed(rt, task)
    async with rt.engine.begin() as building:
        await _chunk(building, task.id, "e1")
        asked = await asyncio.wait_for(tasks.cancel_task(rt, world.staff, task.id), 30)
        assert asked.status == "RUNNING" and asked.cancel_requested
        other = await tasks.create_export(rt, world.staff, world.team, {"q": "x"})
        await _claimed(rt, other, "e2")
        await _chunk(building, other.id, "e2")
        async with rt.engine.begin() as conn:
            console = await asyncio.wait_for(ledger.cancel_id(conn, other.id, now=clock()), 30)
        assert console.cancel_requested
