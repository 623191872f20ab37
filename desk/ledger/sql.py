"""The one executor of the ledger's statements: a named SQL string (psycopg's `%(name)s`
placeholders) runs on whatever the caller holds, and its rows come back as dicts.

Each ledger statement is written once. The worker's hot transitions run on `rt.pg`
(desk/core/pg.py) as single autocommit statements; a caller whose side effects must commit with
the statement (an import's rows, an export's chunks, a person's action) passes its own
connection — a psycopg one, or a SQLAlchemy one whose open transaction the statement joins
(`exec_driver_sql`: the same text, no second spelling). See docs/architecture.md, "Ledger".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.pg import Pg

# Where a statement may run: the autocommit pool, or a connection whose transaction the caller owns.
Db = Pg | psycopg.AsyncConnection[Any] | AsyncConnection


async def rows(db: Db, sql: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run `sql` once on `db`; its rows (RETURNING or SELECT) as dicts, [] when it has none."""
    if isinstance(db, Pg):
        return await db.write(sql, params)
    if isinstance(db, AsyncConnection):
        result = await db.exec_driver_sql(sql, dict(params))
        return [dict(r._mapping) for r in result] if result.returns_rows else []
    cursor = db.cursor(row_factory=dict_row)
    await cursor.execute(sql, params)
    return await cursor.fetchall() if cursor.description else []


async def execute(db: Db, sql: str, params: Mapping[str, Any]) -> None:
    """Run `sql` once on `db` for its effect alone (a lock, a write whose rows nobody reads)."""
    if isinstance(db, psycopg.AsyncConnection):
        await db.execute(sql, params)
    else:
        await rows(db, sql, params)


async def one(db: Db, sql: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first row of `rows`, or None."""
    found = await rows(db, sql, params)
    return found[0] if found else None
