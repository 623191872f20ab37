"""Shared fixtures: real PostgreSQL and Redis (given by URL, or private embedded ones), one cloned
database and one Redis namespace per test."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from desk.core.db import create_engine
from desk.core.pg import Pg
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from taskdesk import migrate
from taskdesk.embedded import PostgresServer, RedisServer
from tests.factories import World, make_world
from tests.helpers import wait_until
from tests.smtp_server import SmtpServer

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Servers:
    admin_url: str  # libpq URL of a maintenance database on the server
    redis_url: str

    def db_url(self, name: str) -> str:
        return _with_dbname(self.admin_url, name)


def _with_dbname(url: str, name: str) -> str:
    head, _, tail = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{tail}" if tail else "")


def _given_urls() -> tuple[str | None, str | None]:
    return (
        os.environ.get("TEST_DATABASE_URL") or os.environ.get("DATABASE_URL"),
        os.environ.get("TEST_REDIS_URL") or os.environ.get("REDIS_URL"),
    )


def _session_root() -> Path:
    """One private folder per test session (named by its pid): concurrent runs must not stop
    each other's servers."""
    root = ROOT / ".taskdesk" / "test" / str(os.getpid())
    if "PYTEST_XDIST_WORKER" not in os.environ:  # in xdist, the controller has done it
        _remove_stale_sessions(root.parent)
    return root


def _start_private(
    root: Path, db_url: str | None, redis_url: str | None
) -> tuple[list[PostgresServer | RedisServer], str, str]:
    """Private servers for whichever URL is not given."""
    started: list[PostgresServer | RedisServer] = []
    if not db_url:
        pg = PostgresServer(root / "pg", fast=True)
        pg.start()
        started.append(pg)
        db_url = pg.admin_url()
    if not redis_url:
        rd = RedisServer(root / "redis", persist=False)
        redis_url = rd.start()
        started.append(rd)
    return started, db_url, redis_url


def _stop_private(root: Path, started: list[PostgresServer | RedisServer]) -> None:
    for server in started:
        server.stop()
        # As root from a folder the server's user cannot enter, the cluster lives in /var/tmp.
        shutil.rmtree(server.root, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


_PRIVATE = pytest.StashKey[tuple[Path, list[PostgresServer | RedisServer]]]()


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, the controller starts the private servers once and its workers use
    them (the URLs reach them in the environment they inherit): one PostgreSQL for the run, not
    one per worker. Each worker still has its own template database and Redis database."""
    workers = getattr(config.option, "numprocesses", None)
    if not workers or hasattr(config, "workerinput") or all(_given_urls()):
        return
    root = _session_root()
    started, db_url, redis_url = _start_private(root, *_given_urls())
    config.stash[_PRIVATE] = (root, started)
    os.environ["TEST_DATABASE_URL"], os.environ["TEST_REDIS_URL"] = db_url, redis_url


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PRIVATE in config.stash:
        _stop_private(*config.stash[_PRIVATE])


def pytest_runtest_setup(item: pytest.Item) -> None:
    """With TASKDESK_REQUIRE_BROWSER=1 (CI) a browser test fails when it cannot run, where it
    would otherwise be skipped."""
    if "browser" in item.keywords:
        from tests.ui.browser import CHROMIUM, browser_required, chromium_missing

        if browser_required() and chromium_missing():
            pytest.fail(f"{CHROMIUM} is missing and TASKDESK_REQUIRE_BROWSER=1: install chromium")


def _redis_of_worker(url: str) -> str:
    """Under pytest-xdist, each worker its own Redis database (the given one + the worker's
    number): a test that flushes its database cannot wipe another worker's queues."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return url
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(base + int(worker[2:])) % 16}"))


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    db_url, redis_url = _given_urls()
    root = _session_root()
    started, db_url, redis_url = _start_private(root, db_url, redis_url)
    db_url = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    yield Servers(admin_url=_with_dbname(db_url, "postgres"), redis_url=_redis_of_worker(redis_url))
    _stop_private(root, started)


def _remove_stale_sessions(parent: Path) -> None:
    """Folders left by test sessions that were killed (their pid is gone)."""
    if not parent.exists():
        return
    for folder in parent.iterdir():
        if folder.name.isdigit() and not Path(f"/proc/{folder.name}").exists():
            pg = PostgresServer(folder / "pg")
            if pg.running():
                pg.started_here = True
                pg.stop()
            shutil.rmtree(pg.root, ignore_errors=True)
            pid_file = folder / "redis" / "redis.pid"
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            shutil.rmtree(folder, ignore_errors=True)


def _admin(servers: Servers) -> psycopg.Connection:
    return psycopg.connect(servers.admin_url, autocommit=True)


@pytest.fixture(scope="session")
def template_db(servers: Servers) -> Iterator[str]:
    """A migrated database that each test clones (CREATE DATABASE … TEMPLATE)."""
    name = f"taskdesk_tpl_{os.getpid()}"
    with _admin(servers) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    migrate.upgrade(servers.db_url(name))
    yield name
    with _admin(servers) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(servers: Servers, template_db: str) -> Iterator[str]:
    name = f"taskdesk_t_{uuid.uuid4().hex[:12]}"
    with _admin(servers) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}" STRATEGY FILE_COPY')
    yield servers.db_url(name)
    with _admin(servers) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(db_url: str, servers: Servers) -> Settings:
    return load_settings(
        taskdesk_env="test",
        database_url=db_url,
        redis_url=servers.redis_url,
        queue_prefix=f"t{uuid.uuid4().hex[:10]}",
        secret_key="test-secret-key-0123456789",
    )


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[AsyncEngine]:
    """SQLAlchemy on a pool of its own, as a process's Runtime has (desk/core/db.py)."""
    pg = Pg(settings)
    await pg.open()
    eng = create_engine(pg.lend)
    yield eng
    await eng.dispose()
    await pg.close()


@pytest.fixture
async def redis(settings: Settings) -> AsyncIterator[Redis]:
    client = Redis.from_url(settings.redis_url)
    yield client
    async for key in client.scan_iter(match=f"*{settings.queue_prefix}*", count=1000):
        await client.delete(key)
    await client.aclose()


class FakeClock:
    """Injected time: tests move it forward instead of sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[SmtpServer]:
    """A real SMTP server process (tests/smtp_server.py), for the mail and browser tests."""
    server = SmtpServer(tmp_path / "smtp")
    try:
        wait_until(server.ready, 30, "the SMTP server to listen")
        yield server
    finally:
        server.stop()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def rt(settings: Settings, clock: FakeClock) -> AsyncIterator[Runtime]:
    runtime = await Runtime.open(settings, clock=clock)
    yield runtime
    async for key in runtime.redis.scan_iter(match=f"*{settings.queue_prefix}*", count=1000):
        await runtime.redis.delete(key)
    await runtime.close()


@pytest.fixture
async def world(rt: Runtime) -> World:
    return await make_world(rt)
