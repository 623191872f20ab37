"""A team's members, administered by its admins: list, add an existing account by e-mail,
change a role, remove.

Removing or demoting someone needs no clean-up of their tasks here: the worker re-checks
membership before it acts (docs/architecture.md, "Visibility"), so a removed member's queued
export fails with a clear error and hands over no data, and a reminder set by someone no longer
on the staff completes as skipped. Their tickets are unassigned, because only staff may be
assignees. A team always keeps at least one admin.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.people import access, audit, sessions

MAX_EMAIL = 320


@dataclass(frozen=True)
class MemberRow:
    user_id: int
    email: str
    display_name: str
    role: Role
    joined_at: datetime


def parse_role(value: str) -> Role:
    try:
        return Role((value or "").strip().upper())
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise ValidationProblem("role", f"use one of {names}") from None


async def _admin(conn: AsyncConnection, user_id: int, team_id: int) -> access.Member:
    """Outsiders are told the team does not exist; members who are not admins, that they may not."""
    member = await access.require_member(conn, user_id, team_id)
    access.require_admin(member)
    return member


async def require_team_admin(rt: Runtime, user_id: int, team_id: int) -> access.Member:
    async with rt.engine.connect() as conn:
        return await _admin(conn, user_id, team_id)


_SELECT = (
    "SELECT u.id AS user_id, u.email, u.display_name, m.role, m.created_at AS joined_at "
    "FROM membership m JOIN app_user u ON u.id = m.user_id WHERE m.team_id = :t"
)


def _row(row: sa.Row[tuple[object, ...]]) -> MemberRow:
    m = row._mapping
    return MemberRow(
        int(m["user_id"]), str(m["email"]), str(m["display_name"]), Role(m["role"]), m["joined_at"]
    )


async def list_members(rt: Runtime, user_id: int, team_id: int) -> list[MemberRow]:
    async with rt.engine.connect() as conn:
        await _admin(conn, user_id, team_id)
        rows = await conn.execute(
            sa.text(_SELECT + " ORDER BY m.role, u.display_name, u.id"), {"t": team_id}
        )
        return [_row(r) for r in rows]


async def _member_row(conn: AsyncConnection, team_id: int, member_id: int) -> MemberRow:
    row = (
        await conn.execute(sa.text(_SELECT + " AND m.user_id = :u"), {"t": team_id, "u": member_id})
    ).first()
    if row is None:
        raise NotFound("Member not found.")
    return _row(row)


async def _lock_team(conn: AsyncConnection, team_id: int) -> None:
    """Serialise membership changes of one team, so two admins cannot demote each other to none."""
    await conn.execute(sa.text("SELECT id FROM team WHERE id = :t FOR UPDATE"), {"t": team_id})


async def _keeps_an_admin(conn: AsyncConnection, team_id: int, losing: int) -> None:
    others = (
        await conn.execute(
            sa.text(
                "SELECT count(*) FROM membership WHERE team_id = :t AND role = 'ADMIN' "
                "AND user_id <> :u"
            ),
            {"t": team_id, "u": losing},
        )
    ).scalar_one()
    if int(others) == 0:
        raise ValidationProblem(
            "role", "a team needs at least one admin; make someone else admin first"
        )


async def _unassign(conn: AsyncConnection, team_id: int, user_id: int, now: datetime) -> None:
    await conn.execute(
        sa.text(
            "UPDATE ticket SET assignee_id = NULL, updated_at = :now "
            "WHERE team_id = :t AND assignee_id = :u"
        ),
        {"t": team_id, "u": user_id, "now": now},
    )


async def _audit(
    conn: AsyncConnection, rt: Runtime, actor_id: int, team_id: int, action: str, detail: str
) -> None:
    actor = await audit.actor_of(conn, actor_id)
    await audit.record(
        conn,
        at=rt.clock(),
        actor_id=actor_id,
        actor=actor,
        action=action,
        team_id=team_id,
        detail=detail,
    )


async def add_member(rt: Runtime, user_id: int, team_id: int, email: str, role: str) -> MemberRow:
    """Add the account that uses `email` (new people come in by invitation: desk.people.invitations)."""
    new_role = parse_role(role)
    # The shared check first: PostgreSQL refuses NUL in text, UTF-8 a lone surrogate.
    email = inputs.line("email", email or "", max_len=MAX_EMAIL)
    if not email or "@" not in email:
        raise ValidationProblem("email", "enter the e-mail address of their account")
    async with rt.engine.begin() as conn:
        await _admin(conn, user_id, team_id)
        await _lock_team(conn, team_id)
        found = (
            await conn.execute(
                sa.text("SELECT id FROM app_user WHERE lower(email) = lower(:e)"), {"e": email}
            )
        ).first()
        if found is None:
            raise ValidationProblem("email", "no account uses that address")
        inserted = (
            await conn.execute(
                sa.text(
                    "INSERT INTO membership (user_id, team_id, role, created_at) "
                    "VALUES (:u, :t, :r, :now) ON CONFLICT DO NOTHING RETURNING user_id"
                ),
                {"u": found.id, "t": team_id, "r": new_role.value, "now": rt.clock()},
            )
        ).first()
        if inserted is None:
            raise ValidationProblem("email", "already a member of this team")
        added = await _member_row(conn, team_id, int(found.id))
        await _audit(conn, rt, user_id, team_id, "member_add", f"{added.email} as {new_role.value}")
        return added


async def change_role(
    rt: Runtime, user_id: int, team_id: int, member_id: int, role: str
) -> MemberRow:
    new_role = parse_role(role)
    async with rt.engine.begin() as conn:
        await _admin(conn, user_id, team_id)
        await _lock_team(conn, team_id)
        current = await _member_row(conn, team_id, member_id)
        if current.role is new_role:
            return current
        if current.role is Role.ADMIN:
            await _keeps_an_admin(conn, team_id, member_id)
        await conn.execute(
            sa.text("UPDATE membership SET role = :r WHERE team_id = :t AND user_id = :u"),
            {"r": new_role.value, "t": team_id, "u": member_id},
        )
        if new_role is Role.CUSTOMER:
            await _unassign(conn, team_id, member_id, rt.clock())
        await _audit(
            conn,
            rt,
            user_id,
            team_id,
            "member_role",
            f"{current.email}: {current.role.value} -> {new_role.value}",
        )
        return await _member_row(conn, team_id, member_id)


async def remove_member(rt: Runtime, user_id: int, team_id: int, member_id: int) -> MemberRow:
    """Returns the removed membership. Their queued work is refused by the worker's re-check."""
    async with rt.engine.begin() as conn:
        await _admin(conn, user_id, team_id)
        await _lock_team(conn, team_id)
        current = await _member_row(conn, team_id, member_id)
        if current.role is Role.ADMIN:
            await _keeps_an_admin(conn, team_id, member_id)
        await conn.execute(
            sa.text("DELETE FROM membership WHERE team_id = :t AND user_id = :u"),
            {"t": team_id, "u": member_id},
        )
        await _unassign(conn, team_id, member_id, rt.clock())
        # Their signed-in browsers end too: pages re-check membership anyway, but a removed
        # person must sign in again to see even their other teams (issue 12).
        await sessions.revoke_all(rt, member_id, conn)
        await _audit(
            conn, rt, user_id, team_id, "member_remove", f"{current.email} ({current.role.value})"
        )
        return current
