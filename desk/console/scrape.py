"""The web's /metrics scrape: this process's counters (desk.core.metrics), then gauges of the
ledger's active rows, the lanes, Redis (live workers, queue depth) and the mailboxes' fetch lag
(desk.console.mailboxes), read at scrape time.

A scrape never scans the ledger: finished work is counted by the counters; only active rows are
counted, through the partial indexes on active status.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client import generate_latest as _generate
from redis.exceptions import RedisError

from desk.console import health
from desk.console import mailboxes as console_mailboxes
from desk.core.metrics import generate_latest, seconds_between
from desk.core.models import ACTIVE_STATUSES
from desk.ledger import lanes

# Only rows in flight: the partial index over WAITING / RUNNING rows answers it (a test checks
# the plan), and the oldest overdue WAITING row comes from the same rows.
ACTIVE_SQL = (
    "SELECT kind, status, count(*) AS n, "
    " min(run_at) FILTER (WHERE status = 'WAITING' AND run_at <= :now) AS oldest "
    "FROM background_task WHERE status IN ('WAITING', 'RUNNING') GROUP BY 1, 2"
)


async def _active(
    rt: Any, now: datetime
) -> tuple[list[Any], set[str], list[console_mailboxes.Lag]]:
    """Active rows by kind and status, the paused lanes (a table of one row per lane), and the
    enabled mailboxes' lags (one statement; its rows follow the mailboxes, not the mail)."""

    async with rt.engine.connect() as conn:
        rows = list(await conn.execute(sa.text(ACTIVE_SQL), {"now": now}))
        paused = await lanes.paused_lanes(conn)
        return rows, paused, await console_mailboxes.lags(conn, now)


async def _redis_view(rt: Any) -> tuple[int, int] | None:
    """(live workers, queue depth), or None when Redis does not answer."""
    try:
        workers = await health.live_workers(rt)
        depth = await rt.queue.depth()
    except (RedisError, OSError, TimeoutError):
        return None
    return len(workers), depth or 0


async def scrape(rt: Any) -> bytes:
    """The web's /metrics: this process's metrics, then the ledger's and Redis's gauges.

    One SQL statement over active rows only (its cost follows the work in flight, not the
    ledger's size), run while Redis is asked for the workers and the queue depth."""
    now = rt.clock()
    (rows, paused, lags), seen = await asyncio.gather(_active(rt, now), _redis_view(rt))
    registry = CollectorRegistry()
    _lane_gauges(registry, rt.settings, rows, paused)
    _mailbox_gauges(registry, rt.settings, lags)
    active = Gauge(
        "taskdesk_tasks_active", "WAITING and RUNNING tasks", ["kind", "status"], registry=registry
    )
    oldest: datetime | None = None
    for r in rows:
        active.labels(r.kind, r.status).set(r.n)
        if r.oldest is not None and (oldest is None or r.oldest < oldest):
            oldest = r.oldest
    Gauge("taskdesk_redis_up", "Redis answered this scrape", registry=registry).set(
        0 if seen is None else 1
    )
    workers, depth = seen or (0, 0)
    Gauge("taskdesk_workers", "Live workers", registry=registry).set(workers)
    Gauge("taskdesk_queue_depth", "Messages waiting in arq", registry=registry).set(depth)
    Gauge(
        "taskdesk_oldest_overdue_seconds",
        "Age of the oldest overdue WAITING task",
        registry=registry,
    ).set(seconds_between(now, oldest) or 0)
    return generate_latest() + _generate(registry)


def _lane_gauges(
    registry: CollectorRegistry, settings: Any, rows: list[Any], paused: set[str]
) -> None:
    """Per lane: active tasks by status, whether an operator paused it, a worker's slots in it."""
    by_lane = Gauge(
        "taskdesk_lane_tasks_active",
        "WAITING and RUNNING tasks by lane",
        ["lane", "status"],
        registry=registry,
    )
    is_paused = Gauge(
        "taskdesk_lane_paused",
        "1 while an operator has paused the lane",
        ["lane"],
        registry=registry,
    )
    slots = Gauge(
        "taskdesk_lane_slots_per_worker",
        "Tasks of the lane one worker runs at once",
        ["lane"],
        registry=registry,
    )
    for name in lanes.LANES:
        is_paused.labels(name).set(1 if name in paused else 0)
        slots.labels(name).set(lanes.slots(settings, name))
        for status in ACTIVE_STATUSES:
            by_lane.labels(name, status).set(0)
    for r in rows:
        by_lane.labels(lanes.lane_of(r.kind), r.status).inc(r.n)


def _mailbox_gauges(
    registry: CollectorRegistry, settings: Any, lags: list[console_mailboxes.Lag]
) -> None:
    """Per enabled mailbox, seconds since its last good fetch; labelled by ids, not names or
    addresses, so the series are one per mailbox and say nothing of whose mail it is."""
    lag = Gauge(
        "taskdesk_mailbox_fetch_lag_seconds",
        "Seconds since the mailbox's last good fetch (since its creation before the first)",
        ["team", "mailbox"],
        registry=registry,
    )
    for one in lags:
        lag.labels(str(one.team_id), str(one.mailbox_id)).set(one.seconds)
    Gauge(
        "taskdesk_mailboxes_stale",
        "Enabled mailboxes not fetched for MAILBOX_STALE_MINUTES",
        registry=registry,
    ).set(console_mailboxes.stale_count(lags, settings.mailbox_stale_minutes))
