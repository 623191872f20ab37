"""Heartbeat: this worker's registration in Redis (20 s expiry), renewed while its dispatcher runs,
removed at once on SIGTERM."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime

from desk.clock import utcnow
from desk.health import worker_key
from desk.runtime import Runtime


@dataclass
class Registration:
    worker_id: str
    started_at: datetime = field(default_factory=utcnow)
    last_sweep: datetime | None = None
    running: int = 0

    def payload(self) -> str:
        return json.dumps(
            {
                "id": self.worker_id,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_at": self.started_at.isoformat(),
                "last_sweep": self.last_sweep.isoformat() if self.last_sweep else None,
                "running": self.running,
            }
        )


async def run_once(rt: Runtime, reg: Registration) -> None:
    key = worker_key(rt.settings.queue_prefix, reg.worker_id)
    await rt.redis.set(key, reg.payload(), ex=rt.settings.heartbeat_ttl_seconds)


async def unregister(rt: Runtime, reg: Registration) -> None:
    await rt.redis.delete(worker_key(rt.settings.queue_prefix, reg.worker_id))
