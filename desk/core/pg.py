"""The one way hot paths reach PostgreSQL: autocommit psycopg connections, one statement per question.

Pages, GraphQL and the worker ask their frequent questions here ("what is task N for this
person?", "claim this row", "finish it"): no SQLAlchemy pool, no pre-ping, no BEGIN/ROLLBACK
around a single read, no ORM objects. SQLModel keeps the tables, the migrations and the
admin-side writes (`Runtime.engine`).

A statement that must share a transaction with another uses `connection()` and psycopg's
`conn.transaction()`. Connections come from a small pool per process (`DB_POOL_SIZE`), opened in
the background so start-up never waits for the database.

Broken connections: after a database restart every idle connection is dead, but nothing pings
them (that would cost a round trip per question). A read that fails on one makes the pool
check its idle connections and runs once more; a write is never repeated here — the caller
decides (`desk.core.db.retrying` for fenced, idempotent statements).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import RowFactory, dict_row, tuple_row
from psycopg_pool import AsyncConnectionPool

from desk.core.settings import Settings

Params = Mapping[str, Any] | Sequence[Any] | None


class Pg:
    """A pool of autocommit connections; `open` before use, `close` after."""

    def __init__(
        self,
        settings: Settings,
        *,
        max_size: int | None = None,
        statement_timeout_ms: int | None = None,
        name: str = "taskdesk-pg",
    ) -> None:
        kwargs: dict[str, Any] = {"autocommit": True}
        if statement_timeout_ms:
            kwargs["options"] = f"-c statement_timeout={int(statement_timeout_ms)}"
        size = max_size or settings.db_pool_size
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            settings.libpq_url,
            min_size=1,
            max_size=size,
            kwargs=kwargs,
            timeout=10.0,  # a question that cannot get a connection fails, it does not hang
            max_lifetime=1800.0,
            open=False,
            name=name,
        )

    async def open(self) -> None:
        await self._pool.open(wait=False)

    async def close(self) -> None:
        await self._pool.close()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """An autocommit connection for several statements (wrap them in `conn.transaction()`)."""
        async with self._pool.connection() as conn:
            yield conn

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
        async with self._pool.connection() as conn:
            cursor = conn.cursor(row_factory=dict_row)
            await cursor.execute(sql, params)
            return await cursor.fetchall() if cursor.description else []

    async def _read(
        self, sql: str, params: Params, *, first: bool, factory: RowFactory[Any] = dict_row
    ) -> list[Any]:
        for attempt in (1, 2):
            try:
                async with self._pool.connection() as conn:
                    cursor = conn.cursor(row_factory=factory)
                    await cursor.execute(sql, params)
                    if first:
                        row = await cursor.fetchone()
                        return [row] if row is not None else []
                    return await cursor.fetchall()
            except psycopg.OperationalError:
                if attempt == 2:
                    raise
                await self._pool.check()  # only after a failure: hot reads never pay a ping
        raise AssertionError("unreachable")

    async def tag(self, setting: str, value: str) -> None:
        """Give every connection the session setting `setting` = `value` (a worker's id, which
        the task event log's trigger records). Call it before use: the pool is replaced by one
        whose every connection is opened with the setting (no connection opened before can
        slip through), and opens in the background as `open` does."""
        old = self._pool
        kwargs = dict(old.kwargs) if isinstance(old.kwargs, dict) else {}
        escaped = value.replace("\\", "\\\\").replace(" ", "\\ ")  # libpq's `options` syntax
        kwargs["options"] = f"{kwargs.get('options', '')} -c {setting}={escaped}".strip()
        self._pool = AsyncConnectionPool(
            old.conninfo,
            min_size=old.min_size,
            max_size=old.max_size,
            kwargs=kwargs,
            timeout=old.timeout,
            max_lifetime=old.max_lifetime,
            open=False,
            name=old.name,
        )
        await old.close()
        await self._pool.open(wait=False)
