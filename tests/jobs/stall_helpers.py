"""Shared by the worker-process tests: rows, open tickets to remind about, exactly-once checks,
leftovers a killed worker of any version leaves in Redis, and a kill -9 that must hit RUNNING work."""

from __future__ import annotations

import time

import sqlalchemy as sa
from arq.constants import in_progress_key_prefix, job_key_prefix

from desk.core.queue import job_id, job_payload, queue_name
from desk.core.runtime import Runtime
from tests.helpers import WorkerProcess, wait_for


async def rows(rt: Runtime, ids: list[int]) -> list[sa.Row]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM background_task WHERE id = ANY(:ids) ORDER BY id")
        return list((await conn.execute(q, {"ids": ids})).all())


def all_status(rt: Runtime, ids: list[int], statuses: tuple[str, ...] = ("COMPLETED",)):
    async def probe() -> list[sa.Row] | None:
        found = await rows(rt, ids)
        return found if all(r.status in statuses for r in found) else None

    return probe


async def open_tickets(rt: Runtime, team: int, creator: int, assignee: int, n: int) -> list[int]:
    async with rt.engine.begin() as conn:
        result = await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, status, priority, creator_id, assignee_id) "
                "SELECT :t, 'Remind me ' || g, 'OPEN', 'NORMAL', :c, :a FROM generate_series(1, :n) g "
                "RETURNING id"
            ),
            {"t": team, "c": creator, "a": assignee, "n": n},
        )
        return [r.id for r in result]


async def assert_effects_once(rt: Runtime, reminders: list[int], exports: list[int]) -> None:
    """One notification per fired reminder; one stored CSV (the committing execution's) per
    completed export."""
    async with rt.engine.connect() as conn:
        per_task = dict(
            (
                await conn.execute(
                    sa.text(
                        "SELECT task_id, count(*) FROM notification WHERE task_id = ANY(:ids) "
                        "GROUP BY task_id"
                    ),
                    {"ids": reminders},
                )
            ).all()
        )
        for row in await rows(rt, exports):
            execs = (
                await conn.execute(
                    sa.text(
                        "SELECT DISTINCT execution_id FROM task_result_chunk WHERE task_id = :t"
                    ),
                    {"t": row.id},
                )
            ).scalars()
            assert list(execs) == [row.execution_id], f"export {row.id}: one stored CSV"
    fired = [r.id for r in await rows(rt, reminders) if not r.result_skipped]
    assert {t: per_task.get(t, 0) for t in fired} == dict.fromkeys(fired, 1)


async def plant_orphans(rt: Runtime, task_ids: list[int], ttl: int = 12 * 3600) -> None:
    """What `kill -9` leaves behind: a queued job marked in progress, for every job-id scheme
    and queue name taskdesk has used, due a minute ago."""
    prefix = rt.settings.queue_prefix
    queues = [f"{prefix}:queue", queue_name(prefix, "short"), queue_name(prefix, "long")]
    score = int(time.time() * 1000) - 60_000
    async with rt.redis.pipeline(transaction=False) as pipe:
        for task_id in task_ids:
            for jid in (f"{prefix}:task:{task_id}:1", job_id(prefix, task_id, 1, 1)):
                pipe.set(job_key_prefix + jid, job_payload(task_id, 1, 0, {}), ex=ttl)
                pipe.set(in_progress_key_prefix + jid, b"1", ex=ttl)
                for q in queues:
                    pipe.zadd(q, {jid: score})
        await pipe.execute()


async def running_under(rt: Runtime, pid: int) -> list[int]:
    """The RUNNING tasks whose current execution the worker process `pid` claimed, per the
    ledger's event log (a worker's id is `{host}-{pid}-{hex}`)."""
    async with rt.engine.connect() as conn:
        result = await conn.execute(
            sa.text(
                "SELECT t.id FROM background_task t JOIN task_event e ON e.task_id = t.id "
                " AND e.event = 'claimed' AND e.execution_id = t.execution_id "
                "WHERE t.status = 'RUNNING' AND e.worker_id ~ :me ORDER BY t.id"
            ),
            {"me": rf"-{pid}-[0-9a-f]+$"},
        )
        return list(result.scalars())


async def kill_mid_work(rt: Runtime, worker: WorkerProcess, timeout: float = 60) -> list[int]:
    """kill -9 `worker` once the ledger shows it holding RUNNING work (waiting up to `timeout`
    seconds for that, else the test fails: a kill that hit nothing proves nothing). Returns the
    RUNNING tasks it held right before the kill."""
    held = await wait_for(
        lambda: running_under(rt, worker.pid),
        timeout=timeout,
        interval=0.01,
        what=f"worker {worker.pid} holding RUNNING work before its kill",
    )
    worker.kill()
    return held
