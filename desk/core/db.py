"""Database engine and sessions, plus the one place that classifies and retries transient errors."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, ParamSpec, TypeVar

import psycopg
from psycopg import errors as pgerr
from sqlalchemy import exc as saexc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlmodel.ext.asyncio.session import AsyncSession

from desk.core.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

TRANSIENT_SQLSTATES = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "57P01",  # admin_shutdown
        "08006",  # connection_failure
        "08001",  # sqlclient_unable_to_establish_sqlconnection
    }
)


APPLICATION_NAME_MAX = 63  # PostgreSQL keeps this many bytes of it (NAMEDATALEN - 1)


def connect_args(
    settings: Settings, *, application_name: str, statement_timeout_ms: int | None = None
) -> dict[str, Any]:
    """What every pooled connection of a process is opened with (docs/architecture.md,
    "Connections"), for psycopg and SQLAlchemy alike.

    `application_name` names the process in `pg_stat_activity` and, for a worker, tells the task
    event log's trigger who claimed what; a transaction pooler hands it on to the server
    connection each transaction runs on. `statement_timeout_ms` (the web process) makes
    PostgreSQL cancel a statement running longer, so no request holds a connection for long.
    Through a transaction pooler (`DB_POOLER=transaction`) a connection keeps no session state:
    no startup options (PgBouncer refuses them; the timeout is then the server's or the
    pooler's) and no prepared statements (the next transaction may run on another server
    connection, which has never seen them)."""
    args: dict[str, Any] = {"application_name": application_name[:APPLICATION_NAME_MAX]}
    if settings.pooled:
        args["prepare_threshold"] = None
    elif statement_timeout_ms:
        args["options"] = f"-c statement_timeout={int(statement_timeout_ms)}"
    return args


def create_engine(lend: Callable[[], Awaitable[Any]]) -> AsyncEngine:
    """SQLAlchemy on the process's one pool (desk/core/pg.py): no pool of its own (`NullPool`),
    each connection borrowed with `lend` and given back when SQLAlchemy closes it — the way
    SQLAlchemy's psycopg dialect documents for a psycopg_pool pool. A broken connection is
    dropped by the pool; the transaction runs again through `retrying`."""
    return create_async_engine("postgresql+psycopg://", poolclass=NullPool, async_creator=lend)


async def end_backend(conn: AsyncConnection) -> None:
    """End `conn`'s server session, whatever state its transaction is in, so that whatever the
    session held (advisory locks outlive a rollback) is freed; the pool then drops the
    connection. SQLAlchemy's `invalidate()` alone would only hand it back to the pool
    (`create_engine`), session and locks intact."""
    if conn.invalidated:
        return  # SQLAlchemy found it broken (a disconnect) and let it go: its backend is gone
    raw = await conn.get_raw_connection()
    driver = raw.driver_connection
    if driver is not None and not driver.closed:
        driver.pgconn.finish()
    await conn.invalidate()


async def driver(conn: AsyncConnection | psycopg.AsyncConnection[Any]) -> Any:
    """The psycopg connection under `conn` (SQLAlchemy's, inside its open transaction), or
    `conn` itself: for statements that run on psycopg whichever connection the caller holds."""
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    raw = await conn.get_raw_connection()
    return raw.driver_connection


def session(engine: AsyncEngine) -> AsyncSession:
    return AsyncSession(engine, expire_on_commit=False)


@asynccontextmanager
async def transaction(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A Core connection inside one transaction (commit on success, rollback on error)."""
    async with engine.begin() as conn:
        yield conn


def stale_plan(exc: BaseException) -> bool:
    """A prepared statement whose result changed shape under it: a migration added a column to
    a table a `SELECT *` reads (docs/architecture.md, "Migrations"). PostgreSQL refuses the
    statement until the session forgets it; a rollback makes psycopg forget them all, and
    `desk.core.pg` does so for its autocommit statements, so running it again succeeds."""
    orig = exc.orig if isinstance(exc, saexc.DBAPIError) else exc
    return isinstance(orig, pgerr.FeatureNotSupported) and "cached plan" in str(orig)


def is_transient(exc: BaseException) -> bool:
    """True for errors where running the same transaction again may well succeed."""
    if stale_plan(exc):
        return True
    orig = exc.orig if isinstance(exc, saexc.DBAPIError) else exc
    if isinstance(exc, saexc.DBAPIError) and exc.connection_invalidated:
        return True
    if isinstance(orig, (pgerr.SerializationFailure, pgerr.DeadlockDetected)):
        return True
    if isinstance(orig, psycopg.OperationalError):
        return True
    sqlstate = getattr(orig, "sqlstate", None)
    return sqlstate in TRANSIENT_SQLSTATES


def describe_db_error(exc: BaseException) -> str:
    """The first line of what the driver said (e.g. "connection refused"), for `last_error`."""
    orig = exc.orig if isinstance(exc, saexc.DBAPIError) and exc.orig is not None else exc
    text = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {text[0]}" if text else type(orig).__name__


async def retrying(fn: Callable[[], Awaitable[T]], *, attempts: int = 4) -> T:
    """Run `fn` (one whole transaction) again on transient errors, with a short backoff."""
    for attempt in range(1, attempts + 1):
        try:
            return await fn()
        except (saexc.DBAPIError, psycopg.Error) as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            log.info("transient database error, retrying (%s): %s", attempt, exc)
            await asyncio.sleep(0.02 * 2**attempt)
    raise AssertionError("unreachable")


P = ParamSpec("P")


def retry_transient(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Decorate a function that runs one whole transaction: it runs again on a transient error."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return await retrying(lambda: fn(*args, **kwargs))

    return wrapper
