"""The worker badge follows heartbeats: a registration whose last beat is old is not a live
worker, even while its Redis key has not expired yet (a killed worker: docs/architecture.md,
"Fencing")."""

import json
from datetime import timedelta

from desk.console import health


async def _register(rt, worker_id: str, beat_age: float) -> None:
    beat = rt.clock() - timedelta(seconds=beat_age)
    payload = {"id": worker_id, "started_at": beat.isoformat(), "last_sweep": beat.isoformat()}
    key = health.worker_key(rt.settings.queue_prefix, worker_id)
    await rt.redis.set(key, json.dumps(payload), ex=60)


async def test_only_recently_beating_workers_count(rt):
    await _register(rt, "alive", beat_age=1)
    await _register(rt, "killed", beat_age=health.beat_stale_after(rt) + 10)
    report = await health.check(rt)
    assert [w["id"] for w in report.workers] == ["alive"]


async def test_a_worker_that_stops_beating_drops_out_without_waiting_for_its_key(rt, clock):
    await _register(rt, "w1", beat_age=0)
    assert len((await health.check(rt)).workers) == 1
    clock.advance(health.beat_stale_after(rt) + 1)  # the key (60 s) is still there
    assert (await health.check(rt)).workers == []
