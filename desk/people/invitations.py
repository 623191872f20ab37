"""Invitations: a team admin (or the command line) invites an e-mail address with a role; the
link `/invitations/<token>` works once, until it expires (INVITATION_TTL_HOURS).

The token is random (`secrets.token_urlsafe`) and only its SHA-256 is stored. Inviting the same
address to the same team again replaces the pending invitation (the old link then says it was
withdrawn). Accepting creates the account and the membership, or — when an account already uses
the address — joins that account, which must be the one signed in (no password is set then).
Who may invite is who may add members (desk.people.members): a team's admins; staff and
customers are not allowed, people of other teams are told the team does not exist. Sending the
e-mail is the caller's (desk.work.onboarding), in the same transaction as `create`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.errors import LinkGone, NotAllowed, NotFound, ValidationProblem
from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.people import access, audit, members, passwords

PATH = "/invitations/"
MAX_TOKEN = 100  # token_urlsafe(32) is 43 characters
MAX_NAME = 200
NOT_VALID = "This invitation link is not valid; check that you copied all of it, or ask your team admin for a new one."


@dataclass(frozen=True)
class InvitationRow:
    id: int
    team_id: int
    team_name: str
    email: str
    role: Role
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class NewInvitation:
    invitation: InvitationRow
    token: str  # shown once (the link), never stored

    @property
    def path(self) -> str:
        return PATH + self.token


@dataclass(frozen=True)
class Pending:
    """A live invitation as its link's holder sees it, and the account its address has."""

    invitation: InvitationRow
    account_id: int | None


@dataclass(frozen=True)
class Accepted:
    user_id: int
    email: str
    team_id: int
    team_name: str
    role: Role
    new_account: bool


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def clean_email(value: object) -> str:
    email = inputs.line("email", value if isinstance(value, str) else "", max_len=members.MAX_EMAIL)
    local, at, domain = email.rpartition("@")
    if not (local and at and "." in domain.strip(".")) or " " in email:
        raise ValidationProblem("email", "enter an e-mail address, such as name@example.com")
    return email


def clean_display_name(value: object) -> str:
    name = inputs.line("display_name", value if isinstance(value, str) else "", max_len=MAX_NAME)
    if not name:
        raise ValidationProblem("display_name", "enter your name (1 to 200 characters)")
    return name


_SELECT = (
    "SELECT i.id, i.team_id, t.name AS team_name, i.email, i.role, i.created_at, i.expires_at, "
    "i.accepted_at, i.revoked_at FROM invitation i JOIN team t ON t.id = i.team_id "
)


def _row(row: sa.Row[tuple[object, ...]]) -> InvitationRow:
    m = row._mapping
    return InvitationRow(
        int(m["id"]),
        int(m["team_id"]),
        str(m["team_name"]),
        str(m["email"]),
        Role(m["role"]),
        m["created_at"],
        m["expires_at"],
    )


async def require_inviter(conn: AsyncConnection, user_id: int | None, team_id: int) -> None:
    """The team's admins (None: the command line). A missing team and another team's answer
    alike: not found."""
    if user_id is None:
        found = await conn.execute(sa.text("SELECT 1 FROM team WHERE id = :t"), {"t": team_id})
        if found.first() is None:
            raise NotFound("Team not found.")
        return
    access.require_admin(await access.require_member(conn, user_id, team_id))


async def create(
    conn: AsyncConnection,
    *,
    team_id: int,
    email: str,
    role: str,
    actor_id: int | None,
    now: datetime,
    ttl: timedelta,
) -> NewInvitation:
    """Write the invitation (replacing a pending one for the same address), audited. The caller
    has checked `require_inviter` in this transaction."""
    new_role = members.parse_role(role)
    email = clean_email(email)
    joined = await conn.execute(
        sa.text(
            "SELECT 1 FROM membership m JOIN app_user u ON u.id = m.user_id "
            "WHERE m.team_id = :t AND lower(u.email) = lower(:e)"
        ),
        {"t": team_id, "e": email},
    )
    if joined.first() is not None:
        raise ValidationProblem("email", "already a member of this team")
    await conn.execute(
        sa.text(
            "UPDATE invitation SET revoked_at = :now WHERE team_id = :t "
            "AND lower(email) = lower(:e) AND accepted_at IS NULL AND revoked_at IS NULL"
        ),
        {"t": team_id, "e": email, "now": now},
    )
    token = secrets.token_urlsafe(32)
    new_id = (
        await conn.execute(
            sa.text(
                "INSERT INTO invitation (team_id, email, role, token_sha256, created_by, "
                "created_at, expires_at) VALUES (:t, :e, :r, :h, :by, :now, :exp) RETURNING id"
            ),
            {
                "t": team_id,
                "e": email,
                "r": new_role.value,
                "h": digest(token),
                "by": actor_id,
                "now": now,
                "exp": now + ttl,
            },
        )
    ).scalar_one()
    row = (await conn.execute(sa.text(_SELECT + "WHERE i.id = :i"), {"i": new_id})).one()
    await audit.record(
        conn,
        at=now,
        actor_id=actor_id,
        actor=await audit.actor_of(conn, actor_id),
        action="invite",
        team_id=team_id,
        detail=f"{email} as {new_role.value}",
    )
    return NewInvitation(_row(row), token)


async def list_pending(rt: Runtime, user_id: int, team_id: int) -> list[InvitationRow]:
    """The team's live invitations, newest first (admins only)."""
    async with rt.engine.connect() as conn:
        await require_inviter(conn, user_id, team_id)
        rows = await conn.execute(
            sa.text(
                _SELECT + "WHERE i.team_id = :t AND i.accepted_at IS NULL "
                "AND i.revoked_at IS NULL AND i.expires_at > :now ORDER BY i.id DESC LIMIT 500"
            ),
            {"t": team_id, "now": rt.clock()},
        )
        return [_row(r) for r in rows]


async def revoke(rt: Runtime, user_id: int, invitation_id: int) -> InvitationRow:
    """Withdraw a pending invitation: its link stops working at once. Audited."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        found = (
            await conn.execute(
                sa.text(_SELECT + "WHERE i.id = :i FOR UPDATE OF i"), {"i": invitation_id}
            )
        ).first()
        if found is None:
            raise NotFound("Invitation not found.")
        row = _row(found)
        access.require_admin(await access.require_member(conn, user_id, row.team_id, "Invitation"))
        if found.accepted_at is not None:
            raise ValidationProblem("id", "already accepted; remove the member instead")
        if found.revoked_at is None:
            await conn.execute(
                sa.text("UPDATE invitation SET revoked_at = :now WHERE id = :i"),
                {"i": invitation_id, "now": now},
            )
            await audit.record(
                conn,
                at=now,
                actor_id=user_id,
                actor=await audit.actor_of(conn, user_id),
                action="invitation_revoke",
                team_id=row.team_id,
                detail=f"{row.email} as {row.role.value}",
            )
        return row


def _usable(found: sa.Row[tuple[object, ...]] | None, now: datetime) -> InvitationRow:
    """The invitation behind a link, or why the link no longer works."""
    if found is None:
        raise NotFound(NOT_VALID)
    if found.accepted_at is not None:
        raise LinkGone(
            "used",
            "This invitation was already accepted. Sign in instead; if you forgot your "
            "password, use “Forgot your password?”.",
        )
    if found.revoked_at is not None:
        raise LinkGone(
            "revoked",
            "This invitation was withdrawn or replaced by a newer one; use the newest link you "
            "were sent, or ask your team admin for a new one.",
        )
    if found.expires_at <= now:
        raise LinkGone("expired", "This invitation has expired; ask your team admin for a new one.")
    return _row(found)


def _well_formed(token: str) -> bool:
    return 20 <= len(token) <= MAX_TOKEN and token.isascii() and token.isprintable()


async def _account(conn: AsyncConnection, email: str) -> int | None:
    row = (
        await conn.execute(
            sa.text("SELECT id FROM app_user WHERE lower(email) = lower(:e)"), {"e": email}
        )
    ).first()
    return int(row.id) if row else None


async def peek(rt: Runtime, token: str) -> Pending:
    """What the link's page shows; NotFound or LinkGone when it cannot be used."""
    if not _well_formed(token):
        raise NotFound(NOT_VALID)
    async with rt.engine.connect() as conn:
        found = (
            await conn.execute(sa.text(_SELECT + "WHERE i.token_sha256 = :h"), {"h": digest(token)})
        ).first()
        invitation = _usable(found, rt.clock())
        return Pending(invitation, await _account(conn, invitation.email))


def _sign_in_first(email: str) -> NotAllowed:
    return NotAllowed(
        f"An account already uses {email}: sign in as that account, then open this link again."
    )


async def accept(
    rt: Runtime, token: str, *, display_name: str, password: str, user_id: int | None
) -> Accepted:
    """Accept the invitation behind `token` as the signed-in `user_id` (None: nobody). A new
    address gets an account with this name and password; an existing account must be the one
    signed in. Signs nobody in: the faces decide that."""
    pending = await peek(rt, token)
    hashed, name = None, ""
    if pending.account_id is None:
        name = clean_display_name(display_name)
        hashed = await passwords.hash_new(password, threads=rt.settings.password_hash_threads)
    elif pending.account_id != user_id:
        raise _sign_in_first(pending.invitation.email)
    now = rt.clock()
    async with rt.engine.begin() as conn:
        found = (
            await conn.execute(
                sa.text(_SELECT + "WHERE i.token_sha256 = :h FOR UPDATE OF i"),
                {"h": digest(token)},
            )
        ).first()
        inv = _usable(found, now)
        account = await _account(conn, inv.email)
        if account is None and hashed is not None:
            account = (
                await conn.execute(
                    sa.text(
                        "INSERT INTO app_user (email, display_name, password_hash, created_at) "
                        "VALUES (:e, :n, :h, :now) RETURNING id"
                    ),
                    {"e": inv.email, "n": name, "h": hashed, "now": now},
                )
            ).scalar_one()
        elif account is None or account != user_id or hashed is not None:
            raise _sign_in_first(inv.email)  # the account came or went since `peek`
        await conn.execute(
            sa.text(
                "INSERT INTO membership (user_id, team_id, role, created_at) "
                "VALUES (:u, :t, :r, :now) ON CONFLICT DO NOTHING"
            ),
            {"u": account, "t": inv.team_id, "r": inv.role.value, "now": now},
        )
        member = await access.require_member(conn, int(account), inv.team_id)
        await conn.execute(
            sa.text("UPDATE invitation SET accepted_at = :now, accepted_by = :u WHERE id = :i"),
            {"i": inv.id, "u": account, "now": now},
        )
        await audit.record(
            conn,
            at=now,
            actor_id=int(account),
            actor=inv.email,
            action="invitation_accept",
            team_id=inv.team_id,
            detail=f"{inv.email} as {member.role.value}",
        )
    return Accepted(
        int(account), inv.email, inv.team_id, inv.team_name, member.role, hashed is not None
    )
