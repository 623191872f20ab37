"""PostgreSQL connections during the drill: `pg_stat_activity` sampled every 0.5 s (the run's
database only; total and by `application_name`), and the budget the hosts must stay within."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from desk.core.budget import budget as product_budget
from desk.core.settings import Settings

EVERY = 0.5
DRILL = "hosts-drill"  # the drill's own connections (setup, checks) are named so
SAMPLER = "hosts-drill-sampler"
HOSTS_PREFIX = "taskdesk-"  # on the maintenance database: not in the run's counts
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
    """The product's own budget (desk/core/budget.py, as `taskdesk doctor` prints it) for
    `webs` web processes and `workers` workers: each process has one pool, a web process
    DB_POOL_SIZE + its listener, a worker its slots + its services."""
    b = product_budget(settings, web_processes=webs, workers=workers, commands=0)
    how = (
        f"{webs} web x ({settings.db_pool_size} pool + 1 listener) + "
        f"{workers} workers x {b.per_worker} (slots + services)"
    )
    return Budget(b.total, b.per_web, b.per_worker, b.total, how)


def pooled_budget(settings: Settings, webs: int, workers: int, pool: int) -> Budget:
    """Through PgBouncer (`--pgbouncer POOL`): what reaches PostgreSQL is PgBouncer's pool plus
    the listeners' direct connections, however many clients the hosts' pools are."""
    b = product_budget(settings, web_processes=webs, workers=workers, commands=0)
    how = (
        f"PgBouncer's pool {pool} + {webs} listeners (direct); PgBouncer's clients up to "
        f"{b.pooled} ({webs} web x {settings.db_pool_size} + {workers} workers x {b.per_worker})"
    )
    return Budget(pool + b.direct, b.per_web, b.per_worker, pool + b.direct, how)


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
            # The product names its processes' connections taskdesk-web, taskdesk-web-feed and
            # taskdesk-worker <id> (desk/core/db.py); the drill's own are named otherwise.
            return sum(n for a, n in counts.items() if a.startswith(HOSTS_PREFIX))

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
            "peak_by_name": {a: max(c.get(a, 0) for _, c in self.samples) for a in names},
        }
