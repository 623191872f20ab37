"""hung-task: a task that never returns holds its slot only until its run-time limit.

One real worker with one short slot (WORKER_MAX_JOBS=1) and NOOP_TIME_LIMIT_SECONDS=2 (both
given to the worker process as settings, like `--set`; a `--set` of either wins). Each run
submits a NOOP scripted `{"hang": true, "max_attempts": 1}` (jobs/processors/noop.py: it awaits
an event nobody sets), waits until it is RUNNING, then submits a plain NOOP, queued behind it for
the one slot. Ours: the hung task's `started_at` → the next task's `started_at`, from the
ledger; the baseline is the limit itself (a slot freed the instant the limit expires). Target:
freed within limit + 1 s. The note gives the part past the limit, and how long after its limit
the hung attempt's end was written (`finished_at`).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from bench import env
from bench.harness import Ctx, runtime, wait_tasks, workers
from bench.stats import Row, Target, percentile
from desk.core.runtime import Runtime
from desk.work import tasks

SETTINGS = {"worker_max_jobs": 1, "noop_time_limit_seconds": 2.0}


async def _row(rt: Runtime, task_id: int) -> Any:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT status, started_at, finished_at FROM background_task WHERE id = :i")
        return (await conn.execute(q, {"i": task_id})).one()


async def hung_task(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    over: dict[str, object] = {k: v for k, v in SETTINGS.items() if k not in env.EXTRA_OVERRIDES}
    freed: list[float] = []  # hung start → next start, s
    past: list[float] = []  # next start - (hung start + limit), ms
    ended: list[float] = []  # hung finished_at - (hung start + limit), ms
    async with runtime(ctx.settings("hung", None, **over)) as rt, workers(ctx, rt, "hung"):
        limit = rt.settings.noop_time_limit_seconds
        for _ in range(ctx.sizes.runs):
            hung = await tasks.submit_noop(
                rt, p.chen, p.big_team, {"hang": True, "max_attempts": 1}
            )
            running = "id = :i AND status = 'RUNNING'"
            await wait_tasks(rt, running, {"i": hung.id}, 1, 30, interval=0.01)
            after = await tasks.submit_noop(rt, p.chen, p.big_team)
            done = "id = :i AND status = 'COMPLETED'"
            await wait_tasks(rt, done, {"i": after.id}, 1, limit + 60)
            h, a = await _row(rt, hung.id or 0), await _row(rt, after.id or 0)
            if h.status != "FAILED":
                raise RuntimeError(f"the hung task ended {h.status}, not FAILED (ran past limit)")
            freed.append((a.started_at - h.started_at).total_seconds())
            past.append((freed[-1] - limit) * 1000)
            ended.append(((h.finished_at - h.started_at).total_seconds() - limit) * 1000)
        s = rt.settings
    return [
        Row(
            "hung-task",
            "s",
            freed,
            [limit] * len(freed),
            Target("value<=", limit + 1),
            note=f"a NOOP that never returns, limit {limit:g} s, worker_max_jobs "
            f"{s.worker_max_jobs}: the next task started {percentile(past, 50):.0f} ms after "
            f"the limit (median; max {max(past):.0f} ms); the hung attempt's end written "
            f"{percentile(ended, 50):.0f} ms after it",
        )
    ]
