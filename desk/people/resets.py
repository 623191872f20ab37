"""Password resets by e-mailed link: `/password/reset/<token>` works once, until it expires
(PASSWORD_RESET_TTL_MINUTES), and setting the password ends every session of that person.

Asking for a link must not tell whether an account uses the address: the answer is the same,
and so is the work — a token is made and hashed and the same two statements run either way
(an INSERT … SELECT that inserts no row for an unknown address, and the audit entry). Only the
e-mail itself, queued by the caller (desk.work.onboarding) when `issue` returns a recipient,
differs: one more row in the same transaction. The token is stored only as its SHA-256.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import LinkGone, NotFound
from desk.core.runtime import Runtime
from desk.people import audit, passwords, sessions
from desk.people.invitations import clean_email

PATH = "/password/reset/"
NOT_VALID = (
    "This password-reset link is not valid; check that you copied all of it, or ask for a new one."
)


@dataclass(frozen=True)
class Recipient:
    """Who a reset link goes to (an account uses the address)."""

    user_id: int
    email: str
    locale: str
    timezone: str
    token: str
    expires_at: datetime

    @property
    def path(self) -> str:
        return PATH + self.token


def stand_in(expires_at: datetime) -> Recipient:
    """A recipient of the same shape for an address no account uses: its e-mail is made and
    taken back (desk.work.onboarding), so the request takes the same work either way."""
    return Recipient(
        0, "nobody@example.invalid", "en", "UTC", secrets.token_urlsafe(32), expires_at
    )


@dataclass(frozen=True)
class Done:
    user_id: int
    email: str
    sessions_ended: int


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


async def issue(
    conn: AsyncConnection, *, email: str, client: str, now: datetime, ttl: timedelta
) -> Recipient | None:
    """Write a reset for the account using `email`, if any, in the caller's transaction; the
    same statements run when none does (then None). Audited either way (never the token)."""
    email = clean_email(email)
    token = secrets.token_urlsafe(32)
    expires = now + ttl
    row = (
        await conn.execute(
            sa.text(
                "WITH u AS (SELECT id, email, locale, timezone FROM app_user "
                "  WHERE lower(email) = lower(:e)), "
                "r AS (INSERT INTO password_reset (user_id, token_sha256, created_at, expires_at) "
                "  SELECT id, :h, :now, :exp FROM u RETURNING user_id) "
                "SELECT u.id, u.email, u.locale, u.timezone FROM u JOIN r ON r.user_id = u.id"
            ),
            {"h": digest(token), "now": now, "exp": expires, "e": email},
        )
    ).first()
    await audit.record(
        conn,
        at=now,
        actor_id=None,
        actor=f"client {client}"[:320],
        action="password_reset_request",
        detail=email if row else f"{email} (no account uses it)",
    )
    if row is None:
        return None
    return Recipient(int(row.id), str(row.email), row.locale, row.timezone, token, expires)


def _usable(found: sa.Row[tuple[object, ...]] | None, now: datetime) -> None:
    if found is None:
        raise NotFound(NOT_VALID)
    if found.used_at is not None:
        raise LinkGone(
            "used", "This password-reset link was already used; ask for a new one if you need it."
        )
    if found.expires_at <= now:
        raise LinkGone("expired", "This password-reset link has expired; ask for a new one.")


def _well_formed(token: str) -> bool:
    return 20 <= len(token) <= 100 and token.isascii() and token.isprintable()


_FIND = (
    "SELECT r.id, r.user_id, r.used_at, r.expires_at FROM password_reset r WHERE token_sha256 = :h"
)


async def check(rt: Runtime, token: str) -> None:
    """Raises NotFound or LinkGone when the link cannot be used (for the link's page)."""
    if not _well_formed(token):
        raise NotFound(NOT_VALID)
    async with rt.engine.connect() as conn:
        found = (await conn.execute(sa.text(_FIND), {"h": digest(token)})).first()
    _usable(found, rt.clock())


async def reset(rt: Runtime, token: str, password: str) -> Done:
    """Set the password of the link's account, use up every reset link it has, and end all its
    sessions (the faces say how many). The link is checked before the password is hashed, so a
    wrong link costs no hash."""
    await check(rt, token)
    hashed = await passwords.hash_new(password, threads=rt.settings.password_hash_threads)
    now = rt.clock()
    async with rt.engine.begin() as conn:
        found = (await conn.execute(sa.text(_FIND + " FOR UPDATE"), {"h": digest(token)})).first()
        _usable(found, now)
        assert found is not None
        user_id = int(found.user_id)
        email = (
            await conn.execute(
                sa.text("UPDATE app_user SET password_hash = :p WHERE id = :u RETURNING email"),
                {"p": hashed, "u": user_id},
            )
        ).scalar_one()
        await conn.execute(
            sa.text(
                "UPDATE password_reset SET used_at = :now WHERE user_id = :u AND used_at IS NULL"
            ),
            {"u": user_id, "now": now},
        )
        ended = await sessions.revoke_all(rt, user_id, conn)
        await audit.record(
            conn,
            at=now,
            actor_id=user_id,
            actor=str(email),
            action="password_reset",
            detail=f"{email}; {ended} session(s) ended",
        )
    return Done(user_id, str(email), ended)
