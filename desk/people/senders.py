"""People who write to a team by e-mail (docs/architecture.md, "Mail in"): an address is matched
to its account or given one (no password: they write by mail; they may set one by a password
reset), and made a customer of the team unless they are a member already. Each function runs in
the caller's transaction — a SQLAlchemy connection, or the psycopg one of a pipelined
conversation post — so the account commits with the ticket or reply it wrote, or not at all."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy.ext.asyncio import AsyncConnection

Conn = AsyncConnection | psycopg.AsyncConnection[Any]

_ACCOUNT = (
    "INSERT INTO app_user (email, display_name) VALUES (%(e)s, %(n)s) "
    "ON CONFLICT ((lower(email))) DO UPDATE SET email = app_user.email RETURNING id"
)
_CUSTOMER = (
    "INSERT INTO membership (user_id, team_id, role) VALUES (%(u)s, %(t)s, 'CUSTOMER') "
    "ON CONFLICT DO NOTHING"
)
_MEMBER = (
    "SELECT EXISTS (SELECT 1 FROM app_user u JOIN membership m ON m.user_id = u.id "
    " AND m.team_id = %(t)s WHERE lower(u.email) = lower(%(e)s)) AS member"
)


async def _first(conn: Conn, sql: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    if isinstance(conn, AsyncConnection):
        result = await conn.exec_driver_sql(sql, dict(params))
        row = result.first()
        return dict(row._mapping) if row is not None else None
    cursor = conn.cursor(row_factory=dict_row)
    await cursor.execute(sql, params)
    return await cursor.fetchone()


async def _run(conn: Conn, sql: str, params: Mapping[str, Any]) -> None:
    if isinstance(conn, AsyncConnection):
        await conn.exec_driver_sql(sql, dict(params))
    else:
        await conn.execute(sql, params)


def display_name(address: str, name: str = "") -> str:
    """The name a mail's sender is shown by: the one their mail gave, else the address's
    local part."""
    return (name or address.split("@")[0]).strip()[:200] or address[:200]


async def account_for(conn: Conn, address: str, name: str = "") -> int:
    """The account of `address` (matched case-insensitively), made when there is none."""
    row = await _first(conn, _ACCOUNT, {"e": address[:320], "n": display_name(address, name)})
    assert row is not None
    return int(row["id"])


async def make_customer(conn: Conn, user_id: int, team_id: int) -> None:
    """`user_id` a customer of the team, unless they are a member already (any role stays)."""
    await _run(conn, _CUSTOMER, {"u": user_id, "t": team_id})


async def customer_for(conn: Conn, team_id: int, address: str, name: str = "") -> int:
    """The account of `address`, made a customer of the team if it is not a member."""
    user_id = await account_for(conn, address, name)
    await make_customer(conn, user_id, team_id)
    return user_id


async def is_member(conn: Conn, team_id: int, address: str) -> bool:
    """Whether the account of `address` is in the team (any role); no account is made."""
    row = await _first(conn, _MEMBER, {"t": team_id, "e": address})
    return bool(row and row["member"])
