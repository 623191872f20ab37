"""PostgreSQL connections during the drill: `pg_stat_activity` sampled every 0.5 s (the run's
database only; total and by `application_name`), and the budget the hosts must stay within."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from desk.core.settings import Settings

EVERY = 0.5
DRILL = "hosts-drill"  # the drill's own connections (setup, checks) are named so
SAMPLER = "hosts-drill-sampler"  # on the maintenance database: not in the run's counts
COUNT = (
    "SELECT coalesce(application_name, ''), count(*) FROM pg_stat_activity "
    "WHERE datname = %s GROUP BY 1"
)


@dataclass(frozen=True)
class Budget:
    total: int
    per_web: int
    per_worker: int
    readme: int  # what the README's "Deployment" formula says for the same processes
    how: str


def budget(settings: Settings, webs: int, workers: int) -> Budget:
    """The most PostgreSQL connections `webs` web processes and `workers` workers may open with
    `settings`: the sum of each process's pools at their largest. (To be replaced by the
    product's own budget function when it has one.)

    A web process (api/app.py opens its Runtime with the default pool size): the SQLAlchemy
    engine, DB_POOL_SIZE + DB_MAX_OVERFLOW (desk/core/db.py); the psycopg hot-path pool,
    DB_POOL_SIZE (desk/core/pg.py); the change feed's listening connection, 1
    (desk/core/runtime.py). A worker sizes both pools for its slots (jobs/worker.py `serve`):
    WORKER_MAX_JOBS + 3 x WORKER_LONG_SLOTS + 4, the engine's plus DB_MAX_OVERFLOW. Not counted:
    the psycopg pool's 2 connections of its own while the database refuses connections (pg.py
    `DIRECT`; no outage in this drill). The README's formula, (DB_POOL_SIZE + DB_MAX_OVERFLOW) x
    processes + 1 per web process, leaves out the psycopg pool and the workers' own size."""
    pool, overflow = settings.db_pool_size, settings.db_max_overflow
    per_web = pool + overflow + pool + 1
    worker_pool = settings.worker_max_jobs + 3 * settings.worker_long_slots + 4
    per_worker = worker_pool + overflow + worker_pool
    readme = (pool + overflow) * (webs + workers) + webs
    how = (
        f"{webs} web x ({pool}+{overflow} engine + {pool} psycopg + 1 feed) + "
        f"{workers} workers x ({worker_pool}+{overflow} engine + {worker_pool} psycopg)"
    )
    return Budget(webs * per_web + workers * per_worker, per_web, per_worker, readme, how)


@dataclass
class Sampler:
    """Counts the run database's connections by `application_name` until stopped."""

    admin_url: str
    dbname: str
    samples: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    failures: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.admin_url, autocommit=True, application_name=SAMPLER
        ) as conn:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    rows = await (await conn.execute(COUNT, (self.dbname,))).fetchall()
                    self.samples.append((time.time(), {str(a): int(n) for a, n in rows}))
                except psycopg.Error:
                    self.failures += 1
                wait = max(0.0, EVERY - (time.monotonic() - began))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)

    def summary(self, hosts: list[str]) -> dict[str, Any]:
        """Peaks: all of the run's connections, the hosts' (all but the drill's own), each
        host's (its processes' names start with it), and each `application_name`'s."""

        def hosts_only(counts: dict[str, int]) -> int:
            return sum(n for a, n in counts.items() if a != DRILL)

        peak_all = max(self.samples, key=lambda s: sum(s[1].values()), default=(0.0, {}))
        peak_hosts = max(self.samples, key=lambda s: hosts_only(s[1]), default=(0.0, {}))
        names = sorted({a for _, counts in self.samples for a in counts})
        return {
            "samples": len(self.samples),
            "failed_samples": self.failures,
            "peak_total": sum(peak_all[1].values()),
            "peak_hosts": hosts_only(peak_hosts[1]),
            "peak_hosts_at": peak_hosts[0],
            "peak_hosts_by_name": peak_hosts[1],
            "peak_by_host": {
                h: max(
                    (
                        sum(n for a, n in c.items() if a.startswith(f"{h}-"))
                        for _, c in self.samples
                    ),
                    default=0,
                )
                for h in hosts
            },
            "peak_by_name": {a: max(c.get(a, 0) for _, c in self.samples) for a in names},
        }
