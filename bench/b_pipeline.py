"""pipeline and start-latency: NOOP tasks through the whole engine vs raw arq no-op jobs.

Both sides get their load from a separate process (bench/submit.py) and run on the same Redis
with the same worker concurrency and poll delay (the worker settings' values). Ours: a real
`taskdesk worker`; times come from the ledger (`created_at`, `started_at`, `finished_at`).
Baseline: bench/rawarq.py, which records job start and end times itself.

pipeline: N tasks submitted as fast as 8 concurrent submitters can → the last one finished;
tasks per second. pipeline-bare-ledger (information): raw arq behind the cheapest durable ledger
(`bench.submit bare`, `bench.rawarq --ledger`: one autocommit INSERT per submission, a claim
and a finish UPDATE per job, on a plain copy of `background_task` with its indexes and no
triggers), against the same raw arq runs: what any ledger of durable rows costs on this machine.
pipeline-cpu (information): the machine's busy CPU per task over those runs, ours against raw
arq's per job, with PostgreSQL's share: where the pipeline saturates the machine, its rate ratio
can be no better than the inverse of this one. start-latency: 50 submissions/s; ours is `started_at - created_at` (from
before the accept's commit, so it includes the accept itself), the baseline enqueue → start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from redis.asyncio import Redis

from bench import env, procs
from bench.harness import Ctx, alternate, runtime, wait_tasks, workers
from bench.stats import Row, Target, percentile
from desk.core.runtime import Runtime

RATE = 50.0
SUBMITTERS = 8
BATCH = "kind = 'NOOP' AND id BETWEEN :a AND :b"


async def _submit(rt: Runtime, args: list[str], within: float) -> dict[str, Any]:
    wenv = env.worker_env(rt.settings)
    return await asyncio.to_thread(procs.run_json, "bench.submit", args, wenv, within)


async def _ours(ctx: Ctx, rt: Runtime, load: list[str], within: float) -> tuple[dict, Any]:
    """Submit NOOP tasks, wait until all completed; (submitter result, ledger rows)."""
    p = ctx.people
    assert p is not None
    args = ["noop", "--user", str(p.chen), "--team", str(p.big_team), *load]
    out = await _submit(rt, args, within)
    span = {"a": out["min_id"], "b": out["max_id"]}
    await wait_tasks(rt, f"{BATCH} AND status = 'COMPLETED'", span, out["count"], within)
    async with rt.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.text(
                    f"SELECT created_at, started_at, finished_at FROM background_task WHERE {BATCH}"
                ),
                span,
            )
        ).all()
    return out, rows


@dataclass
class Spent:
    """CPU seconds spent meanwhile: the machine's (every process, busy cores) and PostgreSQL's."""

    machine: float = 0.0
    postgres: float = 0.0


@contextmanager
def spending(ctx: Ctx) -> Iterator[Spent]:
    """Measure `Spent` over the block. PostgreSQL: its postmaster's tree, closed backends
    included; 0 on servers this benchmark did not start (their processes are not ours to read)."""
    pm = ctx.servers.postmaster_pid()

    def pg() -> float:
        return procs.tree_cpu_seconds(pm, reaped=True) if pm else 0.0

    spent = Spent()
    m0, p0 = procs.machine_busy_seconds(), pg()
    try:
        yield spent
    finally:
        spent.machine, spent.postgres = procs.machine_busy_seconds() - m0, pg() - p0


BARE_TABLE = "bench_bare_ledger"


async def _bare_table(rt: Runtime) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(f"CREATE TABLE IF NOT EXISTS {BARE_TABLE} (LIKE background_task INCLUDING ALL)")
        )


async def _baseline(
    ctx: Ctx, rt: Runtime, tag: str, expect: int, load: list[str], bare: bool = False
) -> tuple:
    """Start a raw arq worker, load it, collect its record; (submitter result, worker record).
    `bare`: both write the bare ledger's rows too (`pipeline-bare-ledger`)."""
    s = rt.settings
    queue = f"{s.queue_prefix}:raw:{tag}"
    ledger: list[str] = []
    mode = "arq"
    if bare:
        p = ctx.people
        assert p is not None
        ledger = ["--ledger", s.libpq_url, "--table", BARE_TABLE]
        mode = "bare"
        load = [*load, "--user", str(p.chen), "--team", str(p.big_team)]
    worker = procs.spawn_json(
        "bench.rawarq",
        [
            *ledger,
            "--redis",
            s.redis_url,
            "--queue",
            queue,
            "--expect",
            str(expect),
            "--max-jobs",
            str(s.worker_max_jobs),
            "--poll-delay",
            str(s.worker_poll_delay),
        ],
        env.worker_env(s),
        ctx.log(f"rawarq-{tag}.log"),
    )
    try:
        await _ready(rt.redis, f"{queue}:ready", 60)
        with spending(ctx) as spent:  # from the raw worker's readiness, not its start
            out = await _submit(rt, [mode, "--queue", queue, *ledger, *load], 600)
            record = await asyncio.to_thread(procs.collect_json, worker, 600)
    finally:
        if worker.poll() is None:
            worker.kill()
    return out, record | {"spent": spent}


async def _ready(redis: Redis, key: str, within: float) -> None:
    deadline = time.monotonic() + within
    while not await redis.exists(key):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{key} not set within {within:.0f} s")
        await asyncio.sleep(0.02)


async def pipeline(ctx: Ctx) -> list[Row]:
    n = ctx.sizes.pipeline
    load = ["--count", str(n), "--concurrency", str(SUBMITTERS)]
    accepts: list[float] = []  # the submitters' own rate: the pipeline cannot beat it
    bare: list[float] = []
    cpu: dict[str, list[Spent]] = {"ours": [], "raw": [], "bare": []}
    async with runtime(ctx.settings("pipeline")) as rt, workers(ctx, rt, "pipeline"):
        await _bare_table(rt)

        async def ours(_: int) -> float:
            with spending(ctx) as spent:
                out, rows = await _ours(ctx, rt, load, 600)
            cpu["ours"].append(spent)
            accepts.append(n / (out["t1"] - out["t0"]))
            return n / (max(r.finished_at for r in rows).timestamp() - out["t0"])

        async def base(i: int) -> float:
            out, record = await _baseline(ctx, rt, f"pipe{i}", n, load)
            cpu["raw"].append(record["spent"])
            out_b, record_b = await _baseline(ctx, rt, f"bare{i}", n, load, bare=True)
            cpu["bare"].append(record_b["spent"])
            bare.append(n / (record_b["last_done"] - out_b["t0"]))
            return n / (record["last_done"] - out["t0"])

        a, b = await alternate(ctx.sizes.pipeline_runs, ours, base)
        s = rt.settings
    return [
        Row(
            "pipeline",
            "tasks/s",
            a,
            b,
            Target("ratio>=", 0.8),
            note=f"{n:,} tasks from {SUBMITTERS} submitters; worker max_jobs {s.worker_max_jobs}, "
            f"poll_delay {s.worker_poll_delay} s (both sides); accepts alone "
            f"{percentile(accepts, 50):,.0f} tasks/s (median)",
        ),
        Row(
            "pipeline-bare-ledger",
            "tasks/s",
            bare,
            b,
            note="information: raw arq behind one INSERT per submission and a claim and a finish "
            "UPDATE per job (autocommit, a plain copy of background_task: its indexes, no "
            "triggers), against the same raw arq runs",
        ),
        _cpu_row(cpu, n),
    ]


def _cpu_row(cpu: dict[str, list[Spent]], n: int) -> Row:
    """What a task costs the whole machine, ours against a raw arq job: on a machine the
    pipeline saturates, the rate ratio can be no better than the inverse of this one."""

    def ms(side: str, part: str) -> str:
        return f"{percentile([1000 * getattr(s, part) / n for s in cpu[side]], 50):.2f} ms"

    known = any(s.postgres for s in cpu["ours"])
    return Row(
        "pipeline-cpu",
        "ms/task",
        [1000 * s.machine / n for s in cpu["ours"]],
        [1000 * s.machine / n for s in cpu["raw"]],
        note="information: the machine's busy CPU per task (every process: submitter, worker, "
        "PostgreSQL, Redis) over each pipeline run, against raw arq's per job; "
        + (
            f"PostgreSQL's share: ours {ms('ours', 'postgres')}, raw arq {ms('raw', 'postgres')}; "
            f"the bare ledger's runs {ms('bare', 'machine')}, of it PostgreSQL "
            f"{ms('bare', 'postgres')}"
            if known
            else "PostgreSQL's share unknown (servers the benchmark did not start)"
        ),
    )


def _latency_rows(
    a50: list[float], a99: list[float], b50: list[float], b99: list[float]
) -> list[Row]:
    return [
        Row("start-latency p50", "ms", a50, b50, Target("value<=", 15)),
        Row("start-latency p99", "ms", a99, b99, Target("value<=", 60)),
    ]


async def start_latency(ctx: Ctx) -> list[Row]:
    seconds = ctx.sizes.rate_seconds
    load = ["--rate", str(RATE), "--seconds", str(seconds)]
    a50: list[float] = []
    a99: list[float] = []
    b50: list[float] = []
    b99: list[float] = []
    async with runtime(ctx.settings("latency")) as rt, workers(ctx, rt, "latency"):

        async def ours(_: int) -> float:
            _, rows = await _ours(ctx, rt, load, 120 + seconds)
            ms = [(r.started_at - r.created_at).total_seconds() * 1000 for r in rows]
            a50.append(percentile(ms, 50))
            a99.append(percentile(ms, 99))
            return a50[-1]

        async def base(i: int) -> float:
            _, record = await _baseline(ctx, rt, f"lat{i}", int(RATE * seconds), load)
            b50.append(percentile(record["latency_ms"], 50))
            b99.append(percentile(record["latency_ms"], 99))
            return b50[-1]

        await alternate(ctx.sizes.long_runs, ours, base)
        s = rt.settings
    rows = _latency_rows(a50, a99, b50, b99)
    rows[0].note = (
        f"{RATE:.0f} tasks/s for {seconds:.0f} s; ours from the accept's start (before commit) "
        f"to RUNNING; poll_delay {s.worker_poll_delay} s"
    )
    return rows
