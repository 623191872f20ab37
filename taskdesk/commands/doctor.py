"""`taskdesk doctor`: this deployment's connection budget against PostgreSQL's `max_connections`.

The budget is desk/core/budget.py's: what `--web` web processes and `--workers` workers with
these settings hold at most. Exits 1 when it does not fit, so a deploy script can stop first.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir

USAGE_SQL = (
    "SELECT current_setting('max_connections')::int AS max, "
    "current_setting('superuser_reserved_connections')::int AS reserved, "
    "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend') AS used, "
    "(SELECT coalesce(json_object_agg(name, n), '{}') FROM (SELECT application_name AS name, "
    " count(*) AS n FROM pg_stat_activity WHERE application_name LIKE 'taskdesk%%' "
    " GROUP BY 1) a) AS ours"
)


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check this deployment's database connection budget",
        description="Print the most PostgreSQL connections N web processes and M workers with "
        "these settings hold at once (each process has one pool: DB_POOL_SIZE for a web "
        "process plus its listener; a worker's slots plus its services), beside the server's "
        "max_connections and what is in use now. Exits 1 when the budget does not fit.",
    )
    p.add_argument("--web", type=int, default=1, metavar="N", help="web processes (default 1)")
    p.add_argument("--workers", type=int, default=2, metavar="M", help="workers (default 2)")
    p.add_argument(
        "--commands",
        type=int,
        default=1,
        metavar="K",
        help="taskdesk commands (seed, tasks, import …) running at once (default 1)",
    )
    add_data_dir(p)
    p.set_defaults(func=run)


@dataclass(frozen=True)
class Server:
    max_connections: int
    reserved: int
    used: int
    ours: dict[str, int]

    @property
    def usable(self) -> int:
        return self.max_connections - self.reserved


def _server(url: str) -> Server:
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(url, connect_timeout=5, application_name="taskdesk-doctor") as conn:
        row: Any = conn.cursor(row_factory=dict_row).execute(USAGE_SQL).fetchone()
    return Server(row["max"], row["reserved"], row["used"], dict(row["ours"]))


def run(args: argparse.Namespace) -> int:
    from desk.core.budget import budget
    from taskdesk.config import resolve_settings

    for name in ("web", "workers", "commands"):
        if getattr(args, name) < 0:
            print(f"taskdesk doctor: --{name} must be 0 or more", file=sys.stderr)
            return 2
    settings = resolve_settings(args.data_dir)
    b = budget(settings, web_processes=args.web, workers=args.workers, commands=args.commands)
    server = _server(settings.direct_url)
    print(f"connection budget: {args.web} web process(es), {args.workers} worker(s)")
    print(
        f"  web process   {b.per_web:>4} each = DB_POOL_SIZE {settings.db_pool_size} + 1 listener"
    )
    print(
        f"  worker        {b.per_worker:>4} each = {settings.worker_max_jobs} short slots "
        f"+ 3 x {settings.worker_long_slots} long slots + 4 services"
    )
    print(f"  commands      {b.commands:>4} ({args.commands} taskdesk command(s) at once)")
    used = ", ".join(f"{k} {v}" for k, v in sorted(server.ours.items())) or "none of taskdesk's"
    print(
        f"PostgreSQL: max_connections {server.max_connections}, {server.reserved} reserved for "
        f"superusers: {server.usable} usable; {server.used} in use now ({used})"
    )
    if settings.pooled:
        return _pooled(b.pooled + b.commands, b.direct, server)
    print(f"total: {b.total} of {server.usable}")
    if b.total > server.usable:
        print(
            f"taskdesk doctor: the budget ({b.total}) is more than PostgreSQL allows "
            f"({server.usable}). Lower DB_POOL_SIZE or WORKER_MAX_JOBS/WORKER_LONG_SLOTS, run "
            "fewer processes, raise max_connections, or put PgBouncer in front "
            "(DB_POOLER=transaction; README, Connections).",
            file=sys.stderr,
        )
        return 1
    print("ok: the budget fits")
    return 0


def _pooled(pooled: int, direct: int, server: Server) -> int:
    print(
        f"through the transaction pooler: {pooled} client connection(s) to it (its "
        "max_client_conn must allow them; its own pool to PostgreSQL is its default_pool_size)"
    )
    print(f"straight to PostgreSQL (the web's listeners): {direct} of {server.usable}")
    if direct > server.usable:
        print(
            f"taskdesk doctor: the direct connections ({direct}) are more than PostgreSQL "
            f"allows ({server.usable}).",
            file=sys.stderr,
        )
        return 1
    print("ok: the direct connections fit; check the pooler's pool against max_connections")
    return 0
