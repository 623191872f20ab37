"""The handles every entry point shares: settings, the database engine, the Redis queue, a clock.

Created by the web app's lifespan, the worker's startup and the CLI — never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from desk.core.clock import Clock, utcnow
from desk.core.db import create_engine
from desk.core.feed import Feed
from desk.core.pg import Pg
from desk.core.queue import Queue
from desk.core.settings import Settings


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    queue: Queue
    pg: Pg  # the hot paths' autocommit pool (desk/core/pg.py); `engine` serves SQLModel and admin writes
    clock: Clock = field(default=utcnow)
    # The change feed's listener: a web process's (`listen()`); None in workers and the CLI.
    feed: Feed | None = None

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        clock: Clock = utcnow,
        pool_size: int | None = None,
        pre_ping: bool = True,
        statement_timeout_ms: int | None = None,
        application_name: str = "taskdesk",
    ) -> Runtime:
        """One pool of `pool_size` connections (default `DB_POOL_SIZE`) serves both `pg` and
        `engine`; `pre_ping` tries each connection SQLAlchemy borrows first (`Pg.lend`).
        `application_name` names this process's connections (`pg_stat_activity`; a
        worker's also tells the task event log who it is: desk/ledger/events.py)."""
        queue = await Queue.open(settings)
        pg = Pg(
            settings,
            max_size=pool_size,
            statement_timeout_ms=statement_timeout_ms,
            application_name=application_name,
            ping_lent=pre_ping,
        )
        await pg.open()
        engine = create_engine(pg.lend)
        return cls(settings=settings, engine=engine, queue=queue, pg=pg, clock=clock)

    @property
    def redis(self) -> Redis:
        return self.queue.redis

    def listen(self) -> Feed:
        """Start this process's one listening connection (docs/architecture.md, "Change feed")."""
        if self.feed is None:
            self.feed = Feed(self.settings.feed_url, application_name="taskdesk-web-feed")
            self.feed.start()
        return self.feed

    async def close(self) -> None:
        if self.feed is not None:
            await self.feed.close()
        await self.queue.close()
        await self.pg.close()
        await self.engine.dispose()
