"""Heartbeat: this worker's registration in Redis (20 s expiry), renewed on every dispatcher pass
(whether or not the database answered), removed on SIGTERM once the worker's loops have stopped
(jobs/worker.py); a stopping worker writes it no more.

The registration (JSON) keeps its original fields — id, host, pid, started_at, last_sweep,
running — and adds: version, last_beat, lanes (per lane: slots, used), and tasks (ids of the
tasks it runs now). The rescuer reads `tasks`: a task whose lease ran out while its worker is
still registered was cut off from the database, not abandoned.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import metadata

from desk.console.health import worker_key
from desk.core.clock import utcnow
from desk.core.runtime import Runtime


@cache
def _version() -> str:
    """The version this process runs: read once (it scans the installed packages' metadata, and
    a beat is written on every dispatcher pass; an upgrade installed meanwhile is not what this
    process runs)."""
    try:
        return metadata.version("taskdesk")
    except metadata.PackageNotFoundError:
        return "dev"


@dataclass
class Registration:
    worker_id: str
    started_at: datetime = field(default_factory=utcnow)
    last_sweep: datetime | None = None
    running: int = 0
    stopping: bool = False  # set on SIGTERM: no beat may follow the removal
    # Filled in by the worker: lane -> (slots, ids of the tasks running in it).
    lanes: Callable[[], dict[str, tuple[int, list[int]]]] = field(default=lambda: {})

    def payload(self, now: datetime | None = None) -> str:
        lanes = self.lanes()
        tasks = sorted(t for _, ids in lanes.values() for t in ids)
        return json.dumps(
            {
                "id": self.worker_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "version": _version(),
                "started_at": self.started_at.isoformat(),
                "last_sweep": self.last_sweep.isoformat() if self.last_sweep else None,
                "last_beat": (now or utcnow()).isoformat(),
                "running": max(self.running, len(tasks)),
                "lanes": {
                    name: {"slots": slots, "used": len(ids)} for name, (slots, ids) in lanes.items()
                },
                "tasks": tasks,
            }
        )


async def run_once(rt: Runtime, reg: Registration) -> None:
    if reg.stopping:
        return
    key = worker_key(rt.settings.queue_prefix, reg.worker_id)
    await rt.redis.set(key, reg.payload(), ex=rt.settings.heartbeat_ttl_seconds)


async def unregister(rt: Runtime, reg: Registration) -> None:
    await rt.redis.delete(worker_key(rt.settings.queue_prefix, reg.worker_id))


async def live_task_ids(rt: Runtime) -> set[int]:
    """Ids of the tasks that live (registered) workers say they run."""
    out: set[int] = set()
    async for key in rt.redis.scan_iter(match=worker_key(rt.settings.queue_prefix, "*"), count=200):
        raw = await rt.redis.get(key)
        if raw:
            out.update(int(t) for t in json.loads(raw).get("tasks", []))
    return out
