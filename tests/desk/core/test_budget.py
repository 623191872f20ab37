"""The connection budget (desk/core/budget.py) holds for real processes under load: one web
process (`taskdesk serve`) and two workers, counted in `pg_stat_activity`; and `taskdesk
doctor` says whether a deployment fits the server's max_connections."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections import Counter

import httpx
import psycopg

from desk.core.budget import budget, web_connections, worker_pool_size
from desk.people import users
from desk.work import tasks
from tests.helpers import ROOT, running_workers, serving, settings_env, wait_for

COUNT_SQL = (
    "SELECT application_name, count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND application_name LIKE 'taskdesk-%' GROUP BY 1"
)


async def _sample(url: str, peaks: Counter[str], stop: asyncio.Event) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            rows = await (await conn.execute(COUNT_SQL)).fetchall()
            for name, n in rows:
                peaks[name] = max(peaks[name], n)
            # The next sample: in 50 ms, or none once the load is over.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.05)


async def _hammer(base: str, headers: dict[str, str], ids: list[int], stop: asyncio.Event) -> int:
    """40 readers at once against the web process until told to stop; how many answered."""
    answered = 0
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:

        async def reader(i: int) -> None:
            nonlocal answered
            while not stop.is_set():
                r = await client.get(f"/api/v1/tasks/{ids[i % len(ids)]}")
                answered += r.status_code in (200, 503)

        await asyncio.gather(*(reader(i) for i in range(40)))
    return answered


async def test_one_web_and_two_workers_stay_within_the_budget(rt, settings, world, tmp_path):
    _, token = await users.create_token(rt, world.staff, "budget")
    script = {"steps": 20, "step_seconds": 0.05}
    peaks: Counter[str] = Counter()
    stop = asyncio.Event()
    sampler = asyncio.create_task(_sample(settings.libpq_url, peaks, stop))
    with serving(settings, tmp_path / "web.log") as base, running_workers(settings, tmp_path, 2):
        ids = [(await tasks.submit_noop(rt, world.staff, world.team, script)).id for _ in range(40)]
        ids += [(await tasks.create_export(rt, p, world.team, {})).id for p in (world.staff, world.customer, world.admin)]  # fmt: skip
        load = asyncio.create_task(_hammer(base, {"Authorization": f"Bearer {token}"}, ids, stop))

        async def all_done() -> bool:
            got = await rt.pg.one(
                "SELECT count(*) AS n FROM background_task WHERE id = ANY(%(i)s) "
                "AND status = 'COMPLETED'",
                {"i": ids},
            )
            return got is not None and got["n"] == len(ids)

        await wait_for(all_done, timeout=120, what="every task to complete")
        stop.set()
        answered = await load
    await sampler
    assert answered > 100, "the web process was under load"
    workers = {k: v for k, v in peaks.items() if k.startswith("taskdesk-worker ")}
    web = peaks["taskdesk-web"] + peaks["taskdesk-web-feed"]
    assert len(workers) == 2, peaks
    assert peaks["taskdesk-web-feed"] == 1, peaks
    assert 2 <= web <= web_connections(settings), peaks
    assert all(n <= worker_pool_size(settings) for n in workers.values()), peaks
    limit = budget(settings, web_processes=1, workers=2, commands=0).total
    assert web + sum(workers.values()) <= limit, (peaks, limit)


def _doctor(settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", "doctor", *args],
        cwd=ROOT, env=settings_env(settings), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_doctor_says_whether_the_budget_fits(settings):
    fits = _doctor(settings, "--web", "1", "--workers", "2")
    assert fits.returncode == 0, fits.stderr
    assert "web process     11 each" in fits.stdout and "ok: the budget fits" in fits.stdout
    assert "max_connections" in fits.stdout
    too_many = _doctor(settings, "--web", "10", "--workers", "40")
    assert too_many.returncode == 1
    assert "is more than PostgreSQL allows" in too_many.stderr
    nonsense = _doctor(settings, "--workers", "-3")
    assert nonsense.returncode == 2 and "--workers must be 0 or more" in nonsense.stderr
