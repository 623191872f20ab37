"""Server-side web sessions: opened at sign-in, looked up on every page request, ended by logout,
a password change or a member's removal.

The browser's cookie carries a random secret; the table keeps only its SHA-256 (a leaked table
signs nobody in). A lookup is one primary-key read on `rt.pg` (`desk.reads.tasks`). Sessions end at an
absolute expiry (`SESSION_MAX_AGE`) or when `revoked_at` is set — never by deleting the cookie.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.pg import Pg
from desk.core.runtime import Runtime

SESSION_MAX_AGE = 14 * 24 * 3600


@dataclass(frozen=True)
class Session:
    user_id: int
    csrf: str
    expires_at: datetime | None = None  # as read from the table (None: not read)


def session_digest(secret: str) -> str:
    """What `web_session.id` stores for a cookie's secret (never the secret itself)."""
    return hashlib.sha256(secret.encode()).hexdigest()


async def session(pg: Pg, secret: str, now: datetime) -> Session | None:
    """The live session behind a cookie's secret, else None."""
    if not secret or len(secret) > 128:
        return None
    data = await pg.one(
        "SELECT user_id, csrf, expires_at FROM web_session "
        "WHERE id = %(sid)s AND revoked_at IS NULL AND expires_at > %(now)s",
        {"sid": session_digest(secret), "now": now},
    )
    return Session(int(data["user_id"]), str(data["csrf"]), data["expires_at"]) if data else None


def _digest(secret: str) -> str:
    return session_digest(secret)


async def open_session(rt: Runtime, user_id: int) -> tuple[str, Session]:
    """A new session for `user_id`: (the secret for the cookie, the session)."""
    secret = secrets.token_urlsafe(32)
    csrf = secrets.token_urlsafe(24)
    now = rt.clock()
    async with rt.engine.begin() as conn:
        # Housekeeping without a sweeper: a user's ended sessions go when they sign in again,
        # so the table holds about one row per live browser.
        await conn.execute(
            sa.text(
                "DELETE FROM web_session WHERE user_id = :u "
                "AND (revoked_at IS NOT NULL OR expires_at <= :now)"
            ),
            {"u": user_id, "now": now},
        )
        await conn.execute(
            sa.text(
                "INSERT INTO web_session (id, user_id, csrf, created_at, expires_at) "
                "VALUES (:id, :u, :c, :now, :exp)"
            ),
            {
                "id": _digest(secret),
                "u": user_id,
                "c": csrf,
                "now": now,
                "exp": now + timedelta(seconds=SESSION_MAX_AGE),
            },
        )
    return secret, Session(user_id, csrf)


async def lookup(rt: Runtime, secret: str) -> Session | None:
    """The live session behind a cookie's secret, or None (unknown, revoked or expired)."""
    # Every request starts here: one autocommit read on `rt.pg` (desk.reads.tasks), which tries once
    # more after a connection the server closed (a database restart) instead of pinging.
    return await session(rt.pg, secret, rt.clock())


async def revoke(rt: Runtime, secret: str) -> None:
    """End one session (logout). Unknown or already ended: nothing to do."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE web_session SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL"
            ),
            {"id": _digest(secret), "now": rt.clock()},
        )


async def revoke_all(rt: Runtime, user_id: int, conn: AsyncConnection | None = None) -> int:
    """End every session of a user (password change, member removal); returns how many ended.
    Pass `conn` to make it part of a caller's transaction."""
    stmt = sa.text(
        "UPDATE web_session SET revoked_at = :now WHERE user_id = :u AND revoked_at IS NULL"
    )
    params = {"u": user_id, "now": rt.clock()}
    if conn is not None:
        return (await conn.execute(stmt, params)).rowcount
    async with rt.engine.begin() as own:
        return (await own.execute(stmt, params)).rowcount
