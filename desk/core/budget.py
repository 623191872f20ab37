"""The connection budget: how many PostgreSQL connections a deployment can hold at most.

Every process has one pool (desk/core/pg.py; SQLAlchemy borrows from it), sized by what it runs:

- a web process: `DB_POOL_SIZE`, plus its change feed's one listening connection;
- a worker: one per short slot, three per long slot (an export's COPY, its chunk writer and its
  progress), plus `WORKER_SERVICES` for the dispatcher, rescuer, pruner and heartbeat;
- a `taskdesk` command (seed, tasks, import, …) while it runs: its own small pool.

While PostgreSQL is known to be away, a web process may also try up to `pg.DIRECT` connections
of its own (they fail, or replace pool connections that are gone), so they are not counted.

Through a transaction pooler (`DB_POOLER=transaction`) the pools are PgBouncer's clients; what
reaches PostgreSQL is PgBouncer's own pool plus the direct connections (listeners, migrations).
`taskdesk doctor` prints this against the server's `max_connections` (docs/architecture.md,
"Connections").
"""

from __future__ import annotations

from dataclasses import dataclass

from desk.core.settings import Settings

WORKER_SERVICES = 4
EXPORT_CONNECTIONS = 3  # a long slot running an export holds its COPY, chunk writer and progress
LISTENERS_PER_WEB = 1
CLI_POOL = 2  # most commands (`taskdesk tasks`, `import`); `seed` takes DB_POOL_SIZE


def worker_pool_size(settings: Settings) -> int:
    """A worker's pool: its slots' connections plus its services'."""
    return (
        settings.worker_max_jobs + EXPORT_CONNECTIONS * settings.worker_long_slots + WORKER_SERVICES
    )


def web_connections(settings: Settings) -> int:
    return settings.db_pool_size + LISTENERS_PER_WEB


@dataclass(frozen=True)
class Budget:
    web_processes: int
    workers: int
    per_web: int
    per_worker: int
    commands: int  # connections of `taskdesk` commands allowed for at once

    @property
    def pooled(self) -> int:
        """Connections the pools may hold (through a pooler: its clients)."""
        return self.web_processes * (self.per_web - LISTENERS_PER_WEB) + self.workers * (
            self.per_worker
        )

    @property
    def direct(self) -> int:
        """Connections that must reach PostgreSQL itself (the listeners)."""
        return self.web_processes * LISTENERS_PER_WEB

    @property
    def total(self) -> int:
        """Everything at once, straight to PostgreSQL (no pooler)."""
        return self.pooled + self.direct + self.commands


def budget(settings: Settings, *, web_processes: int, workers: int, commands: int = 1) -> Budget:
    """The most connections `web_processes` web processes and `workers` workers with these
    settings hold at once, with `commands` `taskdesk` commands running beside them."""
    return Budget(
        web_processes=web_processes,
        workers=workers,
        per_web=web_connections(settings),
        per_worker=worker_pool_size(settings),
        commands=commands * max(CLI_POOL, settings.db_pool_size),
    )
