"""`python -m bench.ledger_cost`: what one task's two ledger writes cost a worker, and what a
leaner path would cost (an experiment behind the pipeline and start-latency rows).

Ours: `jobs.execution.claim_task` + `ledger_run.complete` as the worker runs them (since
issue 11 each one fenced autocommit statement on `rt.pg`, answering with a frozen `Row`; before,
an `engine.begin()` transaction through SQLAlchemy of four round trips building a
`BackgroundTask`). Lean: the two bare UPDATEs as single autocommit statements on a plain psycopg
pool without a ping (one round trip each, rows as tuples). Both sides claim and finish N queued NOOP tasks with 10 at a time (the worker's
concurrency); prints CPU and wall time per task for each, alternately, three times.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from psycopg_pool import AsyncConnectionPool

from bench import env
from bench.harness import load_people, runtime
from desk.core.runtime import Runtime
from desk.ledger import run as ledger_run
from jobs.execution import claim_task

CLAIM = (
    "UPDATE background_task SET status = 'RUNNING', execution_id = %s, attempts = attempts + 1, "
    "lease_until = now() + interval '30 seconds', started_at = now(), updated_at = now() "
    "WHERE id = %s AND run = 1 AND status = 'WAITING' AND NOT cancel_requested RETURNING id, kind"
)
FINISH = (
    "UPDATE background_task SET status = 'COMPLETED', progress = 1, result_summary = 'Done.', "
    "finished_at = now(), lease_until = NULL, updated_at = now() "
    "WHERE id = %s AND execution_id = %s AND status = 'RUNNING' RETURNING id"
)
CONCURRENCY = 10


async def _queued(rt: Runtime, n: int) -> list[int]:
    p = await load_people(rt)
    async with rt.engine.begin() as conn:
        rows = await conn.execute(
            sa.text(
                "INSERT INTO background_task (kind, team_id, owner_id, scope_key, max_attempts) "
                "SELECT 'NOOP', :t, :o, :k || g, 5 FROM generate_series(1, :n) g RETURNING id"
            ),
            {"t": p.big_team, "o": p.chen, "k": f"noop:cost:{uuid.uuid4().hex}:", "n": n},
        )
        return [r.id for r in rows]


async def _ours(rt: Runtime, task_id: int) -> None:
    claimed = await claim_task(rt, task_id, 1)
    assert claimed is not None
    await ledger_run.complete(rt.pg, task_id, claimed[1], now=rt.clock(), summary="Done.")


def _lean(pool: AsyncConnectionPool) -> object:
    async def one(task_id: int) -> None:
        eid = uuid.uuid4().hex
        async with pool.connection() as conn:
            assert await (await conn.execute(CLAIM, (eid, task_id))).fetchone()
        async with pool.connection() as conn:
            assert await (await conn.execute(FINISH, (task_id, eid))).fetchone()

    return one


async def _timed(ids: list[int], one: object) -> tuple[float, float]:
    """(CPU ms per task, wall ms per task) running `one` over `ids`, 10 at a time."""
    queue = list(ids)

    async def lane() -> None:
        while queue:
            await one(queue.pop())  # type: ignore[operator]

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(CONCURRENCY)))
    n = len(ids)
    return (time.process_time() - cpu) * 1000 / n, (time.perf_counter() - wall) * 1000 / n


async def main(n: int) -> dict[str, list[tuple[float, float]]]:
    servers = await asyncio.to_thread(env.open_servers)
    log = env.ROOT / "bench" / "results" / "ledger-cost-seed.log"
    name, url = await asyncio.to_thread(env.empty_db, servers, log)
    out: dict[str, list[tuple[float, float]]] = {"ours": [], "lean": []}
    try:
        settings = env.settings_for(url, servers.redis_url, env.new_prefix("cost"))
        async with runtime(settings, pool_size=CONCURRENCY + 4) as rt:
            pool = AsyncConnectionPool(
                settings.libpq_url,
                min_size=CONCURRENCY,
                kwargs={"autocommit": True},
                open=False,
            )
            await pool.open(wait=True)
            try:
                await _timed(await _queued(rt, 200), lambda i: _ours(rt, i))  # warm-up
                for _ in range(3):
                    out["ours"].append(await _timed(await _queued(rt, n), lambda i: _ours(rt, i)))
                    out["lean"].append(await _timed(await _queued(rt, n), _lean(pool)))
            finally:
                await pool.close()
    finally:
        await asyncio.to_thread(env.drop_db, servers, name)
        await asyncio.to_thread(servers.close)
    return out


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    result = asyncio.run(main(count))
    for side, runs in result.items():
        cells = ", ".join(f"{c:.2f} CPU / {w:.2f} wall" for c, w in runs)
        print(f"{side:5} ms per task (claim + finish): {cells}")
    Path(env.ROOT / "bench" / "results" / "ledger-cost.json").write_text(json.dumps(result))
