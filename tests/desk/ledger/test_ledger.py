"""The ledger's state machine: every legal transition, and illegal ones that change nothing."""

from datetime import timedelta

import pytest

from desk.core.models import BackgroundTask
from desk.ledger import accept as ledger
from desk.ledger import run as ledger_run
from desk.ledger import sends as ledger_sends
from desk.ledger import upkeep as ledger_upkeep
from desk.work import tasks

LEASE = timedelta(seconds=30)


async def _noop(rt, world, **script) -> BackgroundTask:
    return await tasks.submit_noop(rt, world.staff, world.team, script)


async def _claim(rt, task, eid="e1"):
    return await ledger_run.claim(rt.pg, task.id, task.run, eid, now=rt.clock(), lease=LEASE)


async def _get(rt, task_id) -> BackgroundTask:
    async with rt.engine.connect() as conn:
        return await ledger.get(conn, task_id)


async def test_claim_sets_running_with_new_execution_and_attempt(rt, world):
    task = await _noop(rt, world)
    claimed = await _claim(rt, task)
    assert claimed.status == "RUNNING" and claimed.execution_id == "e1" and claimed.attempts == 1
    assert claimed.lease_until == rt.clock() + LEASE
    assert await _claim(rt, task, "e2") is None, "a second claim of the same run must be refused"


async def test_claim_refuses_stale_run(rt, world):
    task = await _noop(rt, world)
    for run in (task.run + 1, task.run - 1):
        assert await ledger_run.claim(rt.pg, task.id, run, "x", now=rt.clock(), lease=LEASE) is None
    assert (await _get(rt, task.id)).status == "WAITING"


async def test_progress_and_finish_are_fenced_by_execution_id(rt, world, clock):
    task = await _noop(rt, world)
    await _claim(rt, task)
    clock.advance(5)
    async with rt.engine.begin() as conn:
        pulse = await ledger_run.pulse(
            conn, task.id, "e1", now=clock(), lease=LEASE, current=5, total=10, message="5 / 10"
        )
        assert pulse.alive and not pulse.cancel_requested
        assert not (
            await ledger_run.pulse(conn, task.id, "stale", now=clock(), lease=LEASE, current=9)
        ).alive
        assert await ledger_run.complete(conn, task.id, "stale", now=clock(), summary="no") is None
    row = await _get(rt, task.id)
    assert (row.progress, row.progress_current, row.progress_message) == (0.5, 5, "5 / 10")
    assert row.lease_until == clock() + LEASE
    async with rt.engine.begin() as conn:
        done = await ledger_run.complete(conn, task.id, "e1", now=clock(), summary="ok")
    assert done.status == "COMPLETED" and done.finished_at == clock() and done.progress == 1
    async with rt.engine.begin() as conn:
        other = await ledger_run.complete(conn, task.id, "e2", now=clock(), summary="other")
        assert other is None, "another execution may not finish it"
        repeat = await ledger_run.complete(conn, task.id, "e1", now=clock(), summary="again")
        assert repeat is not None and repeat.result_summary == "ok", "a repeat changes nothing"
        assert await ledger.cancel(conn, task.id, now=clock()) is None
    assert (
        await ledger_run.fail(rt.pg, task.id, "e1", now=clock(), error="x", retry_at=None) is None
    )
    assert (await _get(rt, task.id)).result_summary == "ok"


async def test_fail_rearms_with_next_run_until_attempts_run_out(rt, world, clock):
    task = await _noop(rt, world, max_attempts=2)
    await _claim(rt, task)
    retry_at = clock() + timedelta(seconds=7)
    again = await ledger_run.fail(
        rt.pg, task.id, "e1", now=clock(), error="boom", retry_at=retry_at
    )
    assert (again.status, again.run, again.run_at, again.last_error) == (
        "WAITING",
        2,
        retry_at,
        "boom",
    )
    assert again.dispatched_at is None and again.finished_at is None
    assert await _claim(rt, task, "late") is None, "the old run's message is stale now"
    await _claim(rt, again, "e2")
    final = await ledger_run.fail(
        rt.pg, task.id, "e2", now=clock(), error="boom 2", retry_at=retry_at
    )
    assert (final.status, final.attempts, final.last_error) == ("FAILED", 2, "boom 2")
    assert final.finished_at == clock()


async def test_an_error_keeps_its_message_key_only_while_it_is_the_last_error(rt, world, clock):
    task = await _noop(rt, world)
    await _claim(rt, task)
    keyed = await ledger_run.fail(
        rt.pg, task.id, "e1", now=clock(), error="5 rows is more than the limit of 2; narrow the filters.",
        retry_at=clock(), error_key="export.too_many_rows", error_params={"rows": 5, "limit": 2},
    )  # fmt: skip
    assert (keyed.error_key, keyed.error_params) == (
        "export.too_many_rows",
        {"rows": 5, "limit": 2},
    )
    await _claim(rt, keyed, "e2")
    plain = await ledger_run.fail(rt.pg, task.id, "e2", now=clock(), error="boom", retry_at=clock())
    assert (plain.last_error, plain.error_key, plain.error_params) == ("boom", None, {})
    await _claim(rt, plain, "e3")
    await ledger_run.fail(
        rt.pg,
        task.id,
        "e3",
        now=clock(),
        error="x",
        retry_at=None,
        error_key="export.too_many_rows",
    )
    async with rt.engine.begin() as conn:
        await ledger.retry(conn, task.id, now=clock())
    again = await _get(rt, task.id)
    await _claim(rt, again, "e4")
    clock.advance(31)
    async with rt.engine.begin() as conn:
        [rescued] = await ledger_upkeep.rescue(conn, now=clock(), limit=10)
    assert "stopped responding" in rescued.last_error and rescued.error_key is None


async def test_fail_without_retry_time_fails_at_once(rt, world, clock):
    task = await _noop(rt, world)
    await _claim(rt, task)
    failed = await ledger_run.fail(
        rt.pg, task.id, "e1", now=clock(), error="bad filters", retry_at=None
    )
    assert failed.status == "FAILED" and failed.attempts == 1


async def test_cancel_waiting_at_once_running_on_request(rt, world, clock):
    waiting = await _noop(rt, world)
    async with rt.engine.begin() as conn:
        c = await ledger.cancel(conn, waiting.id, now=clock())
    assert c.status == "CANCELLED" and c.finished_at == clock()
    assert await _claim(rt, waiting) is None

    running = await _noop(rt, world)
    await _claim(rt, running)
    async with rt.engine.begin() as conn:
        r = await ledger.cancel(conn, running.id, now=clock())
        assert r.status == "RUNNING" and r.cancel_requested
        pulse = await ledger_run.pulse(conn, running.id, "e1", now=clock(), lease=LEASE)
        assert pulse.alive and pulse.cancel_requested
    acked = await ledger_run.ack_cancel(rt.pg, running.id, "e1", now=clock())
    assert acked.status == "CANCELLED"


async def test_rescue_rearms_expired_lease_or_fails_when_out_of_attempts(rt, world, clock):
    a = await _noop(rt, world)
    b = await _noop(rt, world, max_attempts=1)
    await _claim(rt, a, "ea")
    await _claim(rt, b, "eb")
    async with rt.engine.begin() as conn:
        assert (
            await ledger_upkeep.rescue(conn, now=clock() + LEASE - timedelta(seconds=1), limit=10)
            == []
        )
    clock.advance(31)
    async with rt.engine.begin() as conn:
        rescued = {t.id: t for t in await ledger_upkeep.rescue(conn, now=clock(), limit=10)}
    assert rescued[a.id].status == "WAITING" and rescued[a.id].run == 2
    assert "stopped responding" in rescued[a.id].last_error
    assert rescued[b.id].status == "FAILED"
    async with rt.engine.begin() as conn:
        assert await ledger_run.complete(conn, a.id, "ea", now=clock(), summary="late") is None, (
            "the lost execution may not commit"
        )


async def test_release_hands_back_without_spending_an_attempt(rt, world, clock):
    task = await _noop(rt, world)
    await _claim(rt, task)
    back = await ledger_run.release(rt.pg, task.id, "e1", now=clock())
    assert (back.status, back.run, back.attempts) == ("WAITING", 2, 0)


async def test_user_retry_only_from_failed(rt, world, clock):
    task = await _noop(rt, world, max_attempts=1)
    async with rt.engine.begin() as conn:
        assert await ledger.retry(conn, task.id, now=clock()) is None
    await _claim(rt, task)
    await ledger_run.fail(rt.pg, task.id, "e1", now=clock(), error="x", retry_at=None)
    async with rt.engine.begin() as conn:
        fresh = await ledger.retry(conn, task.id, now=clock())
    assert (fresh.status, fresh.run, fresh.attempts, fresh.finished_at) == ("WAITING", 2, 0, None)


async def test_skip_only_waiting(rt, world, clock):
    task = await _noop(rt, world)
    await _claim(rt, task)
    async with rt.engine.begin() as conn:
        assert await ledger.skip(conn, task.id, now=clock(), reason="x") is None


@pytest.mark.parametrize(
    "attempts,low,high", [(1, 1.0, 2.0), (2, 2.0, 4.0), (3, 4.0, 8.0), (20, 150.0, 300.0)]
)
def test_backoff_is_exponential_with_jitter_and_capped(attempts, low, high):
    for _ in range(50):
        d = ledger_run.backoff(attempts, 2.0, 300.0).total_seconds()
        assert low <= d <= high


async def test_rescue_names_a_database_outage_when_the_worker_is_still_alive(rt, world, clock):
    cut_off = await _noop(rt, world)
    dead = await _noop(rt, world)
    await _claim(rt, cut_off, "e1")
    await _claim(rt, dead, "e2")
    clock.advance(31)
    async with rt.engine.begin() as conn:
        rescued = {
            t.id: t
            for t in await ledger_upkeep.rescue(
                conn, now=clock(), limit=10, unreachable=(cut_off.id,)
            )
        }
    assert rescued[cut_off.id].last_error.startswith("Database unreachable")
    assert "stopped responding" in rescued[dead.id].last_error


async def test_each_send_is_reserved_once_and_a_refused_one_handed_back(rt, world, clock):
    task = await _noop(rt, world)
    assert task.sends == 1 and task.dispatched_at is not None, "the insert reserved send 1"
    async with rt.engine.begin() as conn:
        assert await ledger_sends.reserve_send(conn, task.id, 1, now=clock(), team_max=2) is None
        await ledger_sends.unsend(conn, [ledger_sends.Due(task.id, 1, task.run_at, 1, "NOOP")])
        again = await ledger_sends.reserve_send(conn, task.id, 1, now=clock(), team_max=2)
        assert again is not None and again.send == 2
        await ledger_sends.unsend(conn, [ledger_sends.Due(task.id, 1, task.run_at, 1, "NOOP")])
    assert (await _get(rt, task.id)).dispatched_at is not None, "an older send's refusal is moot"
