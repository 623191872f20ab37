"""The only module that talks to arq/Redis for queueing: messages are `{task_id, run}` in JSON.

Redis only wakes workers. Every call here is best effort from the ledger's point of view: a
message that is lost is sent again by the dispatcher, so failures are logged and reported as
False, never raised into a request.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool, Redis
from redis.exceptions import RedisError

from desk import tracing
from desk.settings import Settings

log = logging.getLogger(__name__)

PROCESS_FUNCTION = "process_task"


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def loads(data: bytes) -> Any:
    return json.loads(data)


def job_id(prefix: str, task_id: int, run: int) -> str:
    """One id per delivery round: arq refuses a second job with an id it still knows."""
    return f"{prefix}:task:{task_id}:{run}"


def queue_name(prefix: str) -> str:
    return f"{prefix}:queue"


class Queue:
    def __init__(self, settings: Settings, redis: ArqRedis) -> None:
        self.settings = settings
        self.redis = redis
        self.prefix = settings.queue_prefix
        self.name = queue_name(self.prefix)

    @classmethod
    async def open(cls, settings: Settings) -> Queue:
        # No ping here: the web must start (and accept tasks) while Redis is down.
        pool = ConnectionPool.from_url(
            settings.redis_url, socket_connect_timeout=0.5, socket_timeout=2.0
        )
        redis = ArqRedis(
            pool,
            job_serializer=dumps,
            job_deserializer=loads,
            default_queue_name=queue_name(settings.queue_prefix),
        )
        return cls(settings, redis)

    @tracing.traced("taskdesk.dispatch")
    async def enqueue(self, task_id: int, run: int, defer_until: datetime | None = None) -> bool:
        """Hand `{task_id, run}` to arq; True if Redis has the message (now or already)."""
        try:
            await self.redis.enqueue_job(
                PROCESS_FUNCTION,
                {"task_id": task_id, "run": run, **tracing.message_context()},
                _job_id=job_id(self.prefix, task_id, run),
                _queue_name=self.name,
                _defer_until=defer_until,
            )
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning(
                "enqueue of task %s run %s failed (the dispatcher will resend): %s",
                task_id,
                run,
                exc,
            )
            return False
        return True

    async def depth(self) -> int | None:
        try:
            return int(await self.redis.zcard(self.name))
        except (RedisError, OSError, TimeoutError):
            return None

    async def close(self) -> None:
        await self.redis.aclose()


def plain_redis(url: str) -> Redis:
    redis: Redis = Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=2.0)
    return redis
