"""A process's one pool of PostgreSQL connections, and the hot paths' way to it: autocommit
psycopg connections, one statement per question.

Pages, GraphQL and the worker ask their frequent questions here ("what is task N for this
person?", "claim this row", "finish it"): no pre-ping, no BEGIN/ROLLBACK around a single read,
no ORM objects. SQLModel keeps the tables, the migrations and the admin-side writes
(`Runtime.engine`), on connections it borrows from this same pool (`lend`; desk/core/db.py): a
process holds at most its pool's size, whatever it runs (docs/architecture.md, "Connections").

A statement that must share a transaction with another uses `connection()` and psycopg's
`conn.transaction()`. The pool's size is `DB_POOL_SIZE` in a web process and a worker's slots
plus its services (jobs/worker.py); it opens in the background so start-up never waits for the
database.

Broken connections: after a database restart every idle connection is dead, but nothing pings
them (that would cost a round trip per question). A read that fails on one makes the pool
check its idle connections and runs once more; a write is never repeated here — the caller
decides (`desk.core.db.retrying` for fenced, idempotent statements).

An outage answers at once: while the pool's latest attempt to connect failed (and none has
succeeded since), a question opens a connection of its own (at most `DIRECT` at a time; the
others wait `DOWN_WAIT` for the pool instead of `WAIT`), so a page says "cannot reach its
database" (503, Retry-After) at once rather than after ten seconds, and the first question after
the database returns is answered on that connection instead of waiting for the pool's next
reconnect. The pool gives up a series of reconnect attempts after `RECONNECT_SECONDS` (instead
of backing off for minutes) and then opens a connection when a question finds none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import RowFactory, dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from desk.core.db import connect_args, stale_plan
from desk.core.settings import Settings

Params = Mapping[str, Any] | Sequence[Any] | None
WAIT = 10.0  # a question that cannot get a connection fails, it does not hang
DOWN_WAIT = 1.0  # ... and fails sooner while the database is known to refuse connections
DIRECT = 2  # connections of its own at once while the pool's are gone
RECONNECT_SECONDS = 2.0


class _Reach:
    """Whether the pool's latest attempt to connect failed: learnt from the attempts
    themselves, so the hot path reads one attribute and never pings."""

    def __init__(self) -> None:
        self.down = False

    def connection_class(self) -> type[AsyncConnection[Any]]:
        reach = self

        class Connection(AsyncConnection[Any]):
            _notice_handlers_added: set[Any]

            def add_notice_handler(self, callback: Any) -> None:
                # SQLAlchemy adds its handler each time it borrows the connection (`lend`): once
                # is enough, or the list would grow with every borrowing.
                added = self.__dict__.setdefault("_notice_handlers_added", set())
                if callback not in added:
                    added.add(callback)
                    super().add_notice_handler(callback)

            @classmethod
            async def connect(cls, *args: Any, **kwargs: Any) -> Any:
                try:
                    conn = await super().connect(*args, **kwargs)
                except psycopg.OperationalError:
                    reach.down = True
                    raise
                reach.down = False
                return conn

        return Connection


async def _execute(cursor: Any, sql: str, params: Params) -> None:
    """`cursor.execute`, once more after a stale plan (`stale_plan`: a migration changed the shape
    of a prepared statement's result under this connection). PostgreSQL refused the statement
    before running it, so running it again is safe; DEALLOCATE ALL first makes psycopg forget
    every prepared statement of this connection (as it does on a rollback), so each pooled
    connection meets the change once."""
    try:
        await cursor.execute(sql, params)
    except psycopg.errors.FeatureNotSupported as exc:
        conn = cursor.connection
        if not stale_plan(exc) or not conn.autocommit:
            raise
        await conn.execute("DEALLOCATE ALL")
        await cursor.execute(sql, params)


async def _answers(conn: AsyncConnection[Any]) -> bool:
    try:
        await conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return False
    return True


async def _autocommit_again(conn: AsyncConnection[Any]) -> None:
    """A connection SQLAlchemy borrowed comes back out of autocommit: the hot paths expect it.
    It also comes back holding no session advisory lock (an export writer's build slot outlives
    its rollback), whatever path gave it back."""
    if not conn.autocommit:
        await conn.set_autocommit(True)
        await conn.execute("SELECT pg_advisory_unlock_all()")


class Pg:
    """A pool of autocommit connections; `open` before use, `close` after."""

    def __init__(
        self,
        settings: Settings,
        *,
        max_size: int | None = None,
        statement_timeout_ms: int | None = None,
        name: str = "taskdesk-pg",
        application_name: str = "taskdesk",
        ping_lent: bool = True,
    ) -> None:
        kwargs: dict[str, Any] = {"autocommit": True}
        kwargs |= connect_args(
            settings, application_name=application_name, statement_timeout_ms=statement_timeout_ms
        )
        self._reach = _Reach()
        self._connection_class = self._reach.connection_class()
        self._direct = asyncio.Semaphore(DIRECT)
        self._conninfo = settings.libpq_url
        self._ping_lent = ping_lent
        self._pool = self._new_pool(max_size or settings.db_pool_size, kwargs, name)

    def _new_pool(
        self, size: int, kwargs: dict[str, Any], name: str
    ) -> AsyncConnectionPool[AsyncConnection[Any]]:
        return AsyncConnectionPool(
            self._conninfo,
            connection_class=self._connection_class,
            min_size=1,
            max_size=size,
            kwargs=kwargs,
            timeout=WAIT,
            max_lifetime=1800.0,
            reconnect_timeout=RECONNECT_SECONDS,
            open=False,
            name=name,
            close_returns=True,  # a borrowed connection's close() gives it back (`lend`)
            reset=_autocommit_again,
        )

    @property
    def reachable(self) -> bool:
        """False while the pool's latest attempt to connect failed (none has succeeded since)."""
        return not self._reach.down

    @asynccontextmanager
    async def _take(self, wait: float = WAIT) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection from the pool or, while the database is known away, one of its own."""
        if not self._reach.down:
            async with self._pool.connection(wait) as conn:
                yield conn
            return
        if self._direct.locked():
            async with self._pool.connection(DOWN_WAIT) as conn:
                yield conn
            return
        async with self._direct:
            conn = await self._connect_direct()
            try:
                yield conn
            finally:
                await conn.close()

    async def _connect_direct(self) -> AsyncConnection[Any]:
        """A connection outside the pool, opened as the pool's are; it fails within 2 s while
        the database is away instead of waiting for the pool."""
        kwargs = dict(self._pool.kwargs) if isinstance(self._pool.kwargs, dict) else {}
        return await self._connection_class.connect(self._conninfo, connect_timeout=2, **kwargs)

    async def open(self) -> None:
        await self._pool.open(wait=False)

    @property
    def size(self) -> int:
        """The most connections this pool holds at once (the process's budget)."""
        return self._pool.max_size

    def in_use(self) -> int:
        """Connections handed out now (to hot paths and to SQLAlchemy alike)."""
        stats = self._pool.get_stats()
        return int(stats.get("pool_size", 0)) - int(stats.get("pool_available", 0))

    async def lend(self) -> AsyncConnection[Any]:
        """A connection for SQLAlchemy (desk/core/db.py), out of autocommit so its statements
        share the transaction SQLAlchemy begins; its `close()` gives it back to the pool (in
        autocommit again). While the database is known away, a connection of its own, which
        fails at once instead of waiting for the pool (and really closes).

        With `ping_lent` (every process by default) a borrowed connection is tried first, as
        SQLAlchemy's pre-ping did: after a database restart the pool's idle connections are
        dead, and the first transaction on each would fail (SQLAlchemy's own pool dropped them
        all at the first such error; this pool does not know of SQLAlchemy's errors). A failed
        try makes the pool check every idle connection."""
        if self._reach.down:
            conn = await self._connect_direct()
        else:
            conn = await self._pool.getconn(WAIT)
            if self._ping_lent and not await _answers(conn):
                await conn.close()  # broken: the pool drops it
                await self._pool.check()  # and every idle one that died with it
                conn = await self._pool.getconn(WAIT)
        await conn.set_autocommit(False)
        return conn

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """An autocommit connection for several statements (wrap them in `conn.transaction()`)."""
        async with self._take() as conn:
            yield conn

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection inside one transaction (commit on success, rollback on error) for work
        whose statements are all psycopg's, such as a post (desk/work/conversation.py): no
        SQLAlchemy and no ping before it. In pipeline mode: a statement is sent at once and
        waited for only when its rows are read, so BEGIN goes with the first statement and the
        statements sent before a read share one round trip. A connection the database dropped
        fails its first statement; the pool then checks every idle one (as `lend` does after a
        failed ping), and the caller's `retrying` runs the transaction again on a live one.

        Its statements run on their generic plans, prepared at their first run on a connection:
        PostgreSQL would plan a prepared statement afresh for its first five runs on each
        connection, psycopg would not prepare it before its sixth, and pooled connections take
        turns, so a process's first hundred posts paid ~0.5 ms of planning each. Only for
        statements whose plan does not hang on their values (lookups by key). `SET LOCAL`: the
        setting ends with the transaction. Through a transaction pooler nothing is prepared
        (`connect_args`)."""
        async with self._take() as conn:
            threshold = conn.prepare_threshold
            if threshold is not None:
                conn.prepare_threshold = 0
            try:
                async with conn.pipeline(), conn.transaction():
                    await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                    yield conn
            except psycopg.OperationalError:
                await self._pool.check()
                raise
            finally:
                conn.prepare_threshold = threshold

    async def one(self, sql: str, params: Params = None) -> dict[str, Any] | None:
        """The first row of a read, as a dict (None when there is none)."""
        rows = await self._read(sql, params, first=True)
        return rows[0] if rows else None

    async def all(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """Every row of a read, as dicts."""
        return await self._read(sql, params, first=False)

    async def row(self, sql: str, params: Params = None) -> tuple[Any, ...] | None:
        """The first row of a read as a plain tuple, in the statement's column order: for hot
        reads of many columns, where building a dict per row (and reading every column's name
        from the result each time) costs more than the caller's own work."""
        rows = await self._read(sql, params, first=True, factory=tuple_row)
        return rows[0] if rows else None

    async def rows(self, sql: str, params: Params = None) -> list[tuple[Any, ...]]:
        """Every row of a read, as plain tuples (see `row`)."""
        return await self._read(sql, params, first=False, factory=tuple_row)

    async def write(self, sql: str, params: Params = None) -> list[dict[str, Any]]:
        """One statement that changes rows (its own transaction); the RETURNING rows, if any."""
        async with self._take() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await _execute(cursor, sql, params)
            return await cursor.fetchall() if cursor.description else []

    async def _read(
        self, sql: str, params: Params, *, first: bool, factory: RowFactory[Any] = dict_row
    ) -> list[Any]:
        for attempt in (1, 2):
            # The second try follows a broken connection: the database restarted (a new
            # connection comes in milliseconds) or is away (then say so soon).
            try:
                async with self._take(WAIT if attempt == 1 else DOWN_WAIT) as conn:
                    cursor = conn.cursor(row_factory=factory)
                    await _execute(cursor, sql, params)
                    if first:
                        row = await cursor.fetchone()
                        return [row] if row is not None else []
                    return await cursor.fetchall()
            except PoolTimeout:
                raise  # no connection at all: the database is away, and asking again waits again
            except psycopg.OperationalError:
                if attempt == 2:
                    raise
                await self._pool.check()  # only after a failure: hot reads never pay a ping
        raise AssertionError("unreachable")


async def send(conn: psycopg.AsyncConnection[Any], sql: str, params: Mapping[str, Any]) -> Any:
    """Run `sql` on a psycopg connection and return its cursor, its rows not read yet: inside a
    pipeline (`Pg.transaction`) the statement is only sent, and the statements sent before its
    rows are read (`fetched`) share one round trip."""
    cursor = conn.cursor(row_factory=dict_row)
    await cursor.execute(sql, params)
    return cursor


async def fetched(cursor: Any) -> list[dict[str, Any]]:
    """The rows of a statement `send` ran (one that returns rows: a SELECT or a RETURNING);
    in a pipeline this waits for its answer, and for everything sent before it."""
    rows: list[dict[str, Any]] = await cursor.fetchall()
    return rows
