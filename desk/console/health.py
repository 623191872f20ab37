"""Health: live workers (their Redis registrations), the dispatcher's last sweep, queue depth and
the oldest overdue WAITING task. Green means recent activity, not that a given CSV is right."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from desk.core.runtime import Runtime
from desk.reads import tasks as reads

OVERDUE_SECONDS = 30.0


def worker_key(prefix: str, worker_id: str) -> str:
    return f"{prefix}:worker:{worker_id}"


@dataclass
class Health:
    redis_ok: bool
    workers: list[dict[str, Any]] = field(default_factory=list)
    last_sweep: datetime | None = None
    queue_depth: int | None = None
    oldest_overdue_seconds: float | None = None

    @property
    def ok(self) -> bool:
        overdue = self.oldest_overdue_seconds or 0.0
        return self.redis_ok and bool(self.workers) and overdue < OVERDUE_SECONDS

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "redis": self.redis_ok,
            "workers": len(self.workers),
            "worker_details": self.workers,
            "last_sweep": self.last_sweep.isoformat() if self.last_sweep else None,
            "queue_depth": self.queue_depth,
            "oldest_overdue_seconds": self.oldest_overdue_seconds,
        }


def beat_stale_after(rt: Runtime) -> float:
    """Seconds without a heartbeat after which a registration no longer counts as a live worker.

    A worker beats on every dispatcher sweep (`DISPATCH_INTERVAL`); its key's expiry
    (`HEARTBEAT_TTL_SECONDS`) only cleans up. Reading the last beat means a killed worker
    disappears from the badge within seconds, not when its key finally expires."""
    return max(5.0, 4 * rt.settings.dispatch_interval)


def _beating(worker: dict[str, Any], now: datetime, stale_after: float) -> bool:
    last = worker.get("last_sweep") or worker.get("started_at")
    if not isinstance(last, str):
        return True  # an older worker's registration without times: trust its key's expiry
    try:
        age = (now - datetime.fromisoformat(last)).total_seconds()
    except (ValueError, TypeError):
        return True
    return age <= stale_after


async def live_workers(rt: Runtime) -> list[dict[str, Any]]:
    out = []
    now, stale_after = rt.clock(), beat_stale_after(rt)
    async for key in rt.redis.scan_iter(match=worker_key(rt.settings.queue_prefix, "*"), count=200):
        raw = await rt.redis.get(key)
        if raw and _beating(found := json.loads(raw), now, stale_after):
            out.append(found)
    return sorted(out, key=lambda w: str(w.get("id")))


async def check(rt: Runtime) -> Health:
    now = rt.clock()
    oldest = await reads.oldest_overdue(rt.pg, now)  # one autocommit read: the badge polls it
    overdue = max(0.0, (now - oldest).total_seconds()) if oldest else None
    try:
        workers = await live_workers(rt)
        depth = await rt.queue.depth()
    except (RedisError, OSError, TimeoutError):
        return Health(redis_ok=False, oldest_overdue_seconds=overdue)
    sweeps = [w["last_sweep"] for w in workers if w.get("last_sweep")]
    last = datetime.fromisoformat(max(sweeps)) if sweeps else None
    return Health(True, workers, last, depth, overdue)
