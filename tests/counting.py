"""Counting what a question costs: the statements (and pool checkouts) a block sends."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from desk.core.pg import Pg


@contextmanager
def counting(pg: Pg) -> Iterator[list[str]]:
    """Every pool checkout ("checkout") and statement (its SQL) of `pg` while inside: a cursor
    class that records each execute, put on the real connections as they are handed out."""
    seen: list[str] = []

    class Recording(psycopg.AsyncCursor[Any]):
        async def execute(self, query: Any, params: Any = None, **kw: Any) -> Any:
            seen.append(str(query))
            return await super().execute(query, params, **kw)

    pool = pg._pool
    original = pool.connection

    @asynccontextmanager
    async def connection(*args: Any, **kw: Any) -> AsyncIterator[Any]:
        seen.append("checkout")
        async with original(*args, **kw) as conn:
            before, conn.cursor_factory = conn.cursor_factory, Recording
            try:
                yield conn
            finally:
                conn.cursor_factory = before

    pool.connection = connection  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        del pool.connection  # back to the class's method


@contextmanager
def engine_statements(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every statement `engine` sends while inside, but the cookie's session lookup."""
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM web_session" not in statement:  # the cookie's session lookup: once a request
            statements.append(statement)

    sa.event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        sa.event.remove(engine.sync_engine, "before_cursor_execute", count)
