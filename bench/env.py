"""The benchmark's own servers, scratch databases, Redis namespace and generated data.

With DATABASE_URL / TEST_DATABASE_URL (and REDIS_URL / TEST_REDIS_URL) the benchmarks create
`taskdesk_bench_*` databases on that server and drop them afterwards; no other database is
touched. Without them, private PostgreSQL and Redis servers run under `.taskdesk/bench/` (via
taskdesk/embedded.py) and stop at the end; there the seeded data is kept as a template database
so the next run clones it in seconds instead of generating a million tickets again.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from desk.core.settings import Settings, load_settings
from taskdesk import migrate
from taskdesk.embedded import PostgresServer, RedisServer

ROOT = Path(__file__).resolve().parent.parent
PRIVATE_ROOT = ROOT / ".taskdesk" / "bench"
SECRET = "bench-secret-key-0123456789abcdef"
BIG_TEAM = "Acme Support"  # the 1M-ticket team (search, 1M exports)
SMALL_TEAM = "Globex"  # the ~100k-ticket team (export-100k)
# Quotas and rate limits are product rules, not what these benchmarks measure.
BENCH_OVERRIDES: dict[str, object] = {
    "export_max_per_hour": 100_000,
    "export_max_active_per_user": 1000,
    "mutation_rate_per_minute": 1_000_000,
    "export_max_rows": 2_000_000,
}


# Settings given with `python -m bench --set NAME=VALUE` (experiments: what a change would buy).
# They apply to this process's settings and to every worker and web process started.
EXTRA_OVERRIDES: dict[str, object] = {}


def with_dbname(url: str, name: str) -> str:
    head, _, tail = url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{tail}" if tail else "")


@dataclass
class Servers:
    admin_url: str  # libpq URL of the server's maintenance database
    redis_url: str
    private: bool
    _started: list[PostgresServer | RedisServer] = field(default_factory=list)
    _pg: PostgresServer | None = None

    def url(self, dbname: str) -> str:
        return with_dbname(self.admin_url, dbname)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.admin_url, autocommit=True)

    def postmaster_pid(self) -> int | None:
        """The private PostgreSQL's main process (for its CPU share), else None."""
        if self._pg is None:
            return None
        pidfile = self._pg.data / "postmaster.pid"
        try:
            return int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        for server in reversed(self._started):
            server.stop()


def open_servers() -> Servers:
    db_url = os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    redis_url = os.environ.get("TEST_REDIS_URL") or os.environ.get("REDIS_URL")
    servers = Servers(admin_url="", redis_url=redis_url or "", private=not db_url)
    if not db_url:
        pg = PostgresServer(PRIVATE_ROOT / "pg")
        pg.start()
        servers._started.append(pg)
        servers._pg = pg
        db_url = pg.admin_url()
    if not redis_url:
        rd = RedisServer(PRIVATE_ROOT / "redis", persist=False)
        servers.redis_url = rd.start()
        servers._started.append(rd)
    db_url = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    servers.admin_url = with_dbname(db_url, "postgres")
    return servers


def _exists(servers: Servers, name: str) -> bool:
    with servers.admin() as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (name,),
        ).fetchone()
    return row is not None and row[0] == "ready"


def create_db(servers: Servers, name: str, template: str | None = None) -> str:
    with servers.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return servers.url(name)


def drop_db(servers: Servers, name: str) -> None:
    with servers.admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _data_key(sizes: dict[str, int]) -> str:
    h = hashlib.sha256(repr(sorted(sizes.items())).encode())
    for path in sorted((ROOT / "migrations" / "versions").glob("*.py")):
        h.update(path.read_bytes())
    for rel in ("desk/seed/demo.py", "desk/seed/words.py"):
        h.update((ROOT / rel).read_bytes())
    return h.hexdigest()[:10]


def seed(url: str, redis_url: str, tickets: int, team: str, log: Path) -> None:
    """`taskdesk seed --tickets N --team NAME` against `url` (a subprocess, as a person would)."""
    env = dict(os.environ, DATABASE_URL=url, REDIS_URL=redis_url, TASKDESK_ENV="test")
    env["SECRET_KEY"] = SECRET
    with log.open("ab") as out:
        subprocess.run(
            [sys.executable, "-m", "taskdesk", "seed", "--tickets", str(tickets), "--team", team],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=1800,
        )


def build_data(servers: Servers, name: str, sizes: dict[str, int], log: Path) -> str:
    url = create_db(servers, name)
    migrate.upgrade(url)
    for team, n in sizes.items():
        began = time.monotonic()
        print(f"  seeding {n:,} tickets into {team!r} …", file=sys.stderr, flush=True)
        seed(url, servers.redis_url, n, team, log)
        print(f"  … {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return url


def drop_leftovers(servers: Servers, keep: str) -> None:
    """Private servers only: drop run databases nobody is connected to (left by a killed run)
    and data templates of other code versions (any template but `keep` and the other mode's)."""
    if not servers.private:
        return
    with servers.admin() as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT d.datname FROM pg_database d WHERE d.datname LIKE 'taskdesk_bench_%' "
                "AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)"
            )
        ]
    current = {keep} | {f"taskdesk_bench_data_{_data_key(s)}" for s in KNOWN_SIZES}
    for name in names:
        if name not in current:
            drop_db(servers, name)


# The data sets of `python -m bench` and `--quick` (their templates survive drop_leftovers).
KNOWN_SIZES: list[dict[str, int]] = []


def prepare_data(servers: Servers, sizes: dict[str, int], log: Path) -> tuple[str, str]:
    """A database with the seeded tickets for this run: (name, libpq URL)."""
    run_name = f"taskdesk_bench_run_{uuid.uuid4().hex[:8]}"
    if not servers.private:
        return run_name, build_data(servers, run_name, sizes, log)
    template = f"taskdesk_bench_data_{_data_key(sizes)}"
    drop_leftovers(servers, template)
    if not _exists(servers, template):
        print(f"bench: generating data (kept as {template} for next time)", file=sys.stderr)
        build_data(servers, template, sizes, log)
        with servers.admin() as conn:
            conn.execute(f"COMMENT ON DATABASE \"{template}\" IS 'ready'")
    return run_name, create_db(servers, run_name, template)


def empty_db(servers: Servers, log: Path) -> tuple[str, str]:
    """A migrated database with only the demo people (for the ledger-size benchmarks)."""
    name = f"taskdesk_bench_run_{uuid.uuid4().hex[:8]}"
    url = create_db(servers, name)
    migrate.upgrade(url)
    env = dict(os.environ, DATABASE_URL=url, REDIS_URL=servers.redis_url, SECRET_KEY=SECRET)
    with log.open("ab") as out:
        subprocess.run(
            [sys.executable, "-m", "taskdesk", "seed"],
            cwd=ROOT,
            env=env | {"TASKDESK_ENV": "test"},
            stdout=out,
            stderr=subprocess.STDOUT,
            check=True,
            timeout=300,
        )
    return name, url


def settings_for(db_url: str, redis_url: str, prefix: str, **overrides: object) -> Settings:
    return load_settings(
        taskdesk_env="test",
        database_url=db_url,
        redis_url=redis_url,
        queue_prefix=prefix,
        secret_key=SECRET,
        **(BENCH_OVERRIDES | EXTRA_OVERRIDES | overrides),
    )


def new_prefix(tag: str) -> str:
    return f"bench-{tag}-{uuid.uuid4().hex[:6]}"


def worker_env(settings: Settings, **overrides: object) -> dict[str, str]:
    """Environment for a real worker (or web) process: every setting of `settings` that is not
    the default, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env |= {"TASKDESK_ENV": "test", "PYTHONUNBUFFERED": "1"}
    for name, info in Settings.model_fields.items():
        value = getattr(settings, name)
        if value != info.default:
            env[name.upper()] = str(value)
    env |= {k.upper(): str(v) for k, v in overrides.items()}
    return env
