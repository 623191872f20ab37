"""What every benchmark gets: the run's context (servers, data, sizes, logs), the demo people's
ids, real worker processes that are ready before timing starts, bounded waits on the ledger,
and the alternation of our side with the baseline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from redis.asyncio import Redis

from bench import env, procs
from bench.profiling import recording
from desk.core.runtime import Runtime
from desk.core.settings import Settings


@dataclass(frozen=True)
class Sizes:
    big: int  # tickets of the big team (search, the 1M exports)
    small: int  # tickets of the small team (export-100k)
    pipeline: int  # NOOP tasks per pipeline run
    rate_seconds: float  # start-latency: seconds at 50 tasks/s
    reminders: int
    reminder_span: float  # seconds the reminders' due times spread over
    ledger_rows: int  # finished ledger rows for the sweep
    http_seconds: float  # each status-read / trigger load window
    runs: int  # alternations of ours and baseline (short benchmarks)
    long_runs: int  # alternations for the long ones
    pipeline_runs: int  # alternations of the 10,000-task pipeline (the longest)


FULL = Sizes(1_000_000, 100_000, 10_000, 20.0, 200, 20.0, 1_000_000, 5.0, 5, 3, 2)
QUICK = Sizes(100_000, 100_000, 1_000, 4.0, 40, 4.0, 100_000, 2.0, 2, 1, 1)
for _s in (FULL, QUICK):
    env.KNOWN_SIZES.append({env.BIG_TEAM: _s.big, env.SMALL_TEAM: _s.small})


@dataclass(frozen=True)
class People:
    big_team: int
    small_team: int
    zhou: int  # admin, big team
    chen: int  # staff, big team
    lin: int  # customer, big team
    ada: int  # admin, small team
    ben: int  # staff, small team


@dataclass
class Ctx:
    quick: bool
    sizes: Sizes
    servers: env.Servers
    db_name: str
    db_url: str
    logs: Path
    profile: bool = False  # py-spy the processes under test (bench/profiling.py)
    people: People | None = None
    cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def settings(self, tag: str, db_url: str | None = None, **over: object) -> Settings:
        return env.settings_for(
            db_url or self.db_url, self.servers.redis_url, env.new_prefix(tag), **over
        )

    def log(self, name: str) -> Path:
        return self.logs / name

    def profile_to(self, name: str) -> Path | None:
        """Where the profile of the process `name` goes, or None when not profiling."""
        return self.logs / f"profile-{name}.txt" if self.profile else None


async def load_people(rt: Runtime) -> People:
    async with rt.engine.connect() as conn:
        teams = dict((await conn.execute(sa.text("SELECT name, id FROM team"))).all())
        users = dict(
            (
                await conn.execute(sa.text("SELECT split_part(email, '@', 1), id FROM app_user"))
            ).all()
        )
    return People(
        big_team=teams[env.BIG_TEAM],
        small_team=teams[env.SMALL_TEAM],
        zhou=users["zhou"],
        chen=users["chen"],
        lin=users["lin"],
        ada=users["ada"],
        ben=users["ben"],
    )


@asynccontextmanager
async def runtime(settings: Settings, pool_size: int = 10) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(settings, pool_size=pool_size)
    try:
        yield rt
    finally:
        await clear_namespace(rt.redis, settings.queue_prefix)
        await rt.close()


async def clear_namespace(redis: Redis, prefix: str) -> None:
    """Delete this benchmark's keys (queue, jobs, registrations) — only keys naming its prefix."""
    async for key in redis.scan_iter(match=f"*{prefix}*", count=1000):
        await redis.delete(key)


async def wait_worker_ready(redis: Redis, prefix: str, count: int, within: float = 60) -> None:
    """Until `count` workers of this namespace registered (their dispatcher has swept)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        keys = [k async for k in redis.scan_iter(match=f"{prefix}:worker:*", count=100)]
        if len(keys) >= count:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{count} worker(s) of {prefix} not registered within {within:.0f} s")


@asynccontextmanager
async def workers(
    ctx: Ctx, rt: Runtime, name: str, count: int = 1, **over: object
) -> AsyncIterator[list[procs.Proc]]:
    """`count` real worker processes on `rt`'s namespace, registered before this yields."""
    wenv = env.worker_env(rt.settings, **over)
    started = [procs.worker(wenv, ctx.log(f"{name}-worker{i}.log")) for i in range(count)]
    try:
        await wait_worker_ready(rt.redis, rt.settings.queue_prefix, count)
        with ExitStack() as stack:
            for i, w in enumerate(started):
                stack.enter_context(recording(w.pid, ctx.profile_to(f"{name}-worker{i}")))
            yield started
    finally:
        await asyncio.to_thread(_stop_all, started)


def _stop_all(ps: list[procs.Proc]) -> None:
    for p in ps:
        p.stop()


async def wait_tasks(
    rt: Runtime,
    where: str,
    params: dict[str, Any],
    expect: int,
    within: float,
    interval: float = 0.05,
) -> None:
    """Until `expect` ledger rows match `where` (e.g. finished), or TimeoutError."""
    sql = sa.text(f"SELECT count(*) FROM background_task WHERE {where}")
    deadline = time.monotonic() + within
    seen = 0
    while time.monotonic() < deadline:
        async with rt.engine.connect() as conn:
            seen = int((await conn.execute(sql, params)).scalar_one())
        if seen >= expect:
            return
        await asyncio.sleep(interval)
    raise TimeoutError(f"only {seen}/{expect} tasks matched {where!r} after {within:.0f} s")


async def alternate(
    runs: int,
    ours: Callable[[int], Awaitable[float]],
    base: Callable[[int], Awaitable[float]] | None,
) -> tuple[list[float], list[float]]:
    """Run ours and the baseline alternately (ABBA order against drift); their values."""
    a: list[float] = []
    b: list[float] = []
    for i in range(runs):
        if base is not None and i % 2 == 1:
            b.append(await base(i))
            a.append(await ours(i))
        else:
            a.append(await ours(i))
            if base is not None:
                b.append(await base(i))
    return a, b
