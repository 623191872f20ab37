"""Users, sign-in and API tokens (stored as a SHA-256 hash behind a recognisable prefix)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import ApiToken, Role, User
from desk.core.runtime import Runtime
from desk.people import sessions
from desk.people.passwords import check_password, hash_new

TOKEN_PREFIX = "tdk_"


@dataclass(frozen=True)
class TeamRole:
    team_id: int
    team_name: str
    role: Role


async def get_user(rt: Runtime, user_id: int) -> User | None:
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(sa.text("SELECT * FROM app_user WHERE id = :id"), {"id": user_id})
        ).first()
    return User(**row._mapping) if row else None


async def authenticate(rt: Runtime, email: str, password: str) -> User | None:
    """The user whose e-mail and password these are, else None. The password check runs off
    the event loop and costs the same for an unknown e-mail (see desk.people.passwords)."""
    email = email.strip()
    row = None
    # An address no account can have (NUL, control characters, too long) is not looked up —
    # PostgreSQL refuses NUL in text — but it costs the same hash as any unknown address.
    if 0 < len(email) <= 320 and email.isprintable():
        async with rt.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.text("SELECT * FROM app_user WHERE lower(email) = lower(:e)"),
                    {"e": email},
                )
            ).first()
    threads = rt.settings.password_hash_threads
    stored = row.password_hash if row is not None else None
    if not await check_password(stored, password, threads=threads) or row is None:
        return None
    return User(**row._mapping)


async def set_password(rt: Runtime, user_id: int, password: str) -> int:
    """Give a user a new password and end every session they have (a stolen cookie dies with
    the old password); returns how many sessions ended."""
    hashed = await hash_new(password, threads=rt.settings.password_hash_threads)
    async with rt.engine.begin() as conn:
        found = await conn.execute(
            sa.text("UPDATE app_user SET password_hash = :h WHERE id = :id"),
            {"h": hashed, "id": user_id},
        )
        if found.rowcount == 0:
            raise NotFound("User not found.")
        return await sessions.revoke_all(rt, user_id, conn)


async def teams_of(rt: Runtime, user_id: int) -> list[TeamRole]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT t.id, t.name, m.role FROM membership m JOIN team t ON t.id = m.team_id "
                "WHERE m.user_id = :u ORDER BY t.name"
            ),
            {"u": user_id},
        )
        return [TeamRole(r.id, r.name, Role(r.role)) for r in rows]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(rt: Runtime, user_id: int, name: str) -> tuple[ApiToken, str]:
    """Returns the row and the token itself, which is shown once and never stored."""
    name = inputs.line("name", name or "", max_len=200)
    if not name:
        raise ValidationProblem("name", "give the token a name (1 to 200 characters)")
    public = secrets.token_hex(4)
    token = f"{TOKEN_PREFIX}{public}_{secrets.token_urlsafe(32)}"
    async with rt.engine.begin() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "INSERT INTO api_token (owner_id, name, prefix, token_sha256, created_at) "
                    "VALUES (:u, :n, :p, :h, :now) RETURNING *"
                ),
                {
                    "u": user_id,
                    "n": name,
                    "p": f"{TOKEN_PREFIX}{public}",
                    "h": _digest(token),
                    "now": rt.clock(),
                },
            )
        ).one()
    return ApiToken(**row._mapping), token


async def user_for_token(rt: Runtime, token: str) -> int | None:
    """The owner of a live token (and note its use), or None."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    now = rt.clock()
    # Every bearer request starts here: one statement on `rt.pg`, no engine checkout. It may
    # stamp last_used_at (at most once a minute, so reads stay cheap), and is still sent as a
    # read: `rt.pg.one` runs it once more after a connection a database restart closed, which
    # is safe because stamping the same time twice changes nothing.
    row = await rt.pg.one(
        "WITH t AS (SELECT id, owner_id, last_used_at FROM api_token "
        "  WHERE token_sha256 = %(h)s AND revoked_at IS NULL), "
        "u AS (UPDATE api_token a SET last_used_at = %(now)s FROM t WHERE a.id = t.id "
        "  AND (t.last_used_at IS NULL OR t.last_used_at < %(stale)s)) "
        "SELECT owner_id FROM t",
        {"h": _digest(token), "now": now, "stale": now - timedelta(minutes=1)},
    )
    return int(row["owner_id"]) if row else None


async def list_tokens(rt: Runtime, user_id: int) -> list[ApiToken]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT * FROM api_token WHERE owner_id = :u ORDER BY id DESC"), {"u": user_id}
        )
        return [ApiToken(**r._mapping) for r in rows]


async def revoke_token(rt: Runtime, user_id: int, token_id: int) -> ApiToken:
    async with rt.engine.begin() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "UPDATE api_token SET revoked_at = coalesce(revoked_at, :now) "
                    "WHERE id = :id AND owner_id = :u RETURNING *"
                ),
                {"id": token_id, "u": user_id, "now": rt.clock()},
            )
        ).first()
    if row is None:
        raise NotFound("Token not found.")
    return ApiToken(**row._mapping)
