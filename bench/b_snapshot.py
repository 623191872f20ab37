"""long-snapshot: does a long export hold back PostgreSQL's cleanup of the ledger? (issue 41, 3)

One real worker takes `RATE` NOOP tasks/s for `window` seconds (bench/submit.py, its own
process) under one of three pressures, alternated in the same run:

- none: nothing else runs (the baseline);
- exports: whole-team exports of the big team back to back through the same worker, the whole
  window (the product's export path);
- held: one REPEATABLE READ snapshot of the run's database held the whole window, as the
  export's writers shared one for a whole file until issue 41 (since, an export holds a
  snapshot only for the one statement that copies its rows, docs/architecture.md, "Export
  snapshot"): the horizon a long export used to hold, without its CPU.

While the pressure still runs, after the load: `dispatcher.run_once` with nothing due
(median of `SWEEPS` passes), then `VACUUM background_task, task_event`, whose report leaves in
`n_dead_tup` the dead rows it could not remove (a snapshot older than them still sees them).
Start latency: `started_at - created_at` of the window's NOOPs, p99.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import sqlalchemy as sa

from bench import env, procs
from bench.b_export import run_export
from bench.harness import Ctx, runtime, wait_tasks, workers
from bench.stats import Row, Target, percentile
from desk.core.runtime import Runtime
from jobs import dispatcher

RATE = 200.0
SWEEPS = 20
TABLES = ("background_task", "task_event")
MODES = ("none", "exports", "held")
BATCH = "kind = 'NOOP' AND id BETWEEN :a AND :b"


async def _vacuum(url: str) -> dict[str, int]:
    """VACUUM the ledger's tables; the dead rows each still has (those it could not remove)."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"VACUUM {', '.join(TABLES)}")
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        cur = await conn.execute(
            "SELECT relname, n_dead_tup FROM pg_stat_user_tables WHERE relname = ANY(%s)",
            (list(TABLES),),
        )
        return {name: int(n) for name, n in await cur.fetchall()}


@contextlib.asynccontextmanager
async def _held(url: str) -> AsyncIterator[None]:
    """A REPEATABLE READ snapshot of the run's database, held for the block (the kind an export's writers shared)."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        await conn.execute("SELECT count(*) FROM ticket")
        yield
        await conn.rollback()


@contextlib.asynccontextmanager
async def _exporting(ctx: Ctx, rt: Runtime, done: list[float]) -> AsyncIterator[None]:
    """Whole-team exports of the big team back to back until the block ends (the last one is
    waited for, so no export overlaps the next mode); their seconds go to `done`."""
    p = ctx.people
    assert p is not None
    stop = asyncio.Event()

    async def loop() -> None:
        while not stop.is_set():
            task = await run_export(rt, p.zhou, p.big_team, {}, within=900)
            assert task.finished_at is not None
            done.append((task.finished_at - task.created_at).total_seconds())

    runner = asyncio.ensure_future(loop())
    await _until_running(rt, runner)
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(runner, 900)


async def _until_running(rt: Runtime, runner: asyncio.Future[None], within: float = 60) -> None:
    """Until an export is RUNNING (or the loop failed: its error is raised)."""
    deadline = time.monotonic() + within
    sql = sa.text(
        "SELECT count(*) FROM background_task WHERE kind = 'EXPORT' AND status = 'RUNNING'"
    )
    while time.monotonic() < deadline:
        if runner.done():
            runner.result()
            return
        async with rt.engine.connect() as conn:
            if (await conn.execute(sql)).scalar_one():
                return
        await asyncio.sleep(0.02)
    raise TimeoutError(f"no export running within {within:.0f} s")


def _pressure(mode: str, ctx: Ctx, rt: Runtime, exports: list[float]) -> Any:
    if mode == "held":
        return _held(rt.settings.libpq_url)
    if mode == "exports":
        return _exporting(ctx, rt, exports)
    return contextlib.nullcontext()


async def _load(ctx: Ctx, rt: Runtime, seconds: float) -> list[float]:
    """RATE NOOPs/s for `seconds` from a separate process, all completed; their start ms."""
    p = ctx.people
    assert p is not None
    args = ["noop", "--user", str(p.chen), "--team", str(p.big_team)]
    args += ["--rate", str(RATE), "--seconds", str(seconds)]
    wenv = env.worker_env(rt.settings)
    out = await asyncio.to_thread(procs.run_json, "bench.submit", args, wenv, 300 + seconds)
    span = {"a": out["min_id"], "b": out["max_id"]}
    await wait_tasks(rt, f"{BATCH} AND status = 'COMPLETED'", span, out["count"], 300)
    sql = sa.text(f"SELECT started_at - created_at FROM background_task WHERE {BATCH}")
    async with rt.engine.connect() as conn:
        return [d.total_seconds() * 1000 for d in (await conn.execute(sql, span)).scalars()]


async def _sweeps(rt: Runtime) -> float:
    took = []
    for _ in range(SWEEPS):
        began = time.perf_counter()
        await dispatcher.run_once(rt)
        took.append((time.perf_counter() - began) * 1000)
    return percentile(took, 50)


async def _one(ctx: Ctx, rt: Runtime, mode: str, seconds: float, exports: list[float]) -> dict:
    url = rt.settings.libpq_url
    await _vacuum(url)  # every window starts with the dead rows of the last one gone
    async with _pressure(mode, ctx, rt, exports):
        starts = await _load(ctx, rt, seconds)
        sweep = await _sweeps(rt)
        dead = await _vacuum(url)
    return {"p99": percentile(starts, 99), "sweep": sweep, "dead": dead}


def _dead(r: dict) -> float:
    return float(sum(r["dead"].values()))


async def long_snapshot(ctx: Ctx) -> list[Row]:
    seconds = 8.0 if ctx.quick else 30.0
    got: dict[str, list[dict]] = {m: [] for m in MODES}
    took: list[float] = []  # each export's accept → stored, seconds
    async with runtime(ctx.settings("snapshot")) as rt, workers(ctx, rt, "snapshot"):
        await _load(ctx, rt, 1.0)  # warm-up: the worker's connections and plans
        for i in range(ctx.sizes.long_runs):
            # A different order each run, against drift.
            for mode in MODES[i % 3 :] + MODES[: i % 3]:
                got[mode].append(await _one(ctx, rt, mode, seconds, took))
    return _rows(got, took, seconds)


def _rows(got: dict[str, list[dict]], took: list[float], seconds: float) -> list[Row]:
    def of(mode: str, key: str) -> list[float]:
        return [_dead(r) if key == "dead" else r[key] for r in got[mode]]

    def split(mode: str) -> str:
        return ", ".join(
            f"{t} {percentile([r['dead'][t] for r in got[mode]], 50):,.0f}" for t in TABLES
        )

    held = {k: percentile(of("held", k), 50) for k in ("dead", "sweep", "p99")}
    before = (
        f"before (one REPEATABLE READ snapshot held the whole window, as an export's was until issue 41): "
        f"{held['dead']:,.0f} dead left ({split('held')}), sweep {held['sweep']:.2f} ms, "
        f"start p99 {held['p99']:.1f} ms"
    )
    note = (
        f"{RATE:.0f} NOOPs/s for {seconds:.0f} s through one worker while whole-team exports of "
        f"the big team ran back to back ({len(took)} exports, median "
        f"{percentile(took, 50) if took else float('nan'):.1f} s each); baseline: no export. "
        f"Dead rows left by a VACUUM at the window's end, exports still running: "
        f"{split('exports')} (baseline {split('none')}). {before}"
    )
    rows = [
        Row("long-snapshot dead left", "rows", of("exports", "dead"), of("none", "dead"),
            Target("value<=", RATE * 2), note=note),
        Row("long-snapshot sweep (nothing due)", "ms", of("exports", "sweep"), of("none", "sweep"),
            Target("value<=", 5)),
        Row("long-snapshot start p99", "ms", of("exports", "p99"), of("none", "p99"),
            Target("value<=", 60)),
    ]  # fmt: skip
    for key, unit, name in (
        ("dead", "rows", "dead left"),
        ("sweep", "ms", "sweep"),
        ("p99", "ms", "start p99"),
    ):
        rows.append(
            Row(f"long-snapshot {name}, held snapshot (before)", unit, of("held", key),
                of("none", key), note="information: one snapshot held the whole window, as an export's writers shared one")
        )  # fmt: skip
    return rows
