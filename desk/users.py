"""Users, sign-in and API tokens (stored as a SHA-256 hash behind a recognisable prefix)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from desk import inputs
from desk.errors import NotFound, ValidationProblem
from desk.models import ApiToken, Role, User
from desk.passwords import verify_password
from desk.runtime import Runtime

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
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text("SELECT * FROM app_user WHERE lower(email) = lower(:e)"),
                {"e": email.strip()},
            )
        ).first()
    if row is None or not verify_password(row.password_hash, password):
        return None
    return User(**row._mapping)


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
    # last_used_at is written at most once a minute, so reads stay cheap.
    async with rt.engine.begin() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "WITH t AS (SELECT id, owner_id, last_used_at FROM api_token "
                    "  WHERE token_sha256 = :h AND revoked_at IS NULL), "
                    "u AS (UPDATE api_token a SET last_used_at = :now FROM t WHERE a.id = t.id "
                    "  AND (t.last_used_at IS NULL OR t.last_used_at < :stale)) "
                    "SELECT owner_id FROM t"
                ),
                {"h": _digest(token), "now": now, "stale": now - timedelta(minutes=1)},
            )
        ).first()
    return int(row.owner_id) if row else None


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
