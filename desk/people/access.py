"""Who may see and do what (docs/architecture.md, "Visibility").

Membership is read from the database on every call."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import NotAllowed, NotFound
from desk.core.models import Role, TaskKind


@dataclass(frozen=True)
class Member:
    user_id: int
    team_id: int
    role: Role

    @property
    def is_staff(self) -> bool:
        """Admins and staff work on all of the team's tickets."""
        return self.role in (Role.ADMIN, Role.STAFF)

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


async def membership(conn: AsyncConnection, user_id: int, team_id: int) -> Member | None:
    row = (
        await conn.execute(
            sa.text("SELECT role FROM membership WHERE user_id = :u AND team_id = :t"),
            {"u": user_id, "t": team_id},
        )
    ).first()
    return Member(user_id, team_id, Role(row.role)) if row else None


async def require_member(
    conn: AsyncConnection, user_id: int, team_id: int, what: str = "Team"
) -> Member:
    """A non-member is told the team does not exist, exactly as for a missing one."""
    member = await membership(conn, user_id, team_id)
    if member is None:
        raise NotFound(f"{what} not found.")
    return member


def require_staff(member: Member) -> None:
    if not member.is_staff:
        raise NotAllowed("Only staff and admins can do this.")


def require_admin(member: Member) -> None:
    if not member.is_admin:
        raise NotAllowed("Only team admins can do this.")


def can_see_ticket(member: Member, creator_id: int) -> bool:
    return member.is_staff or creator_id == member.user_id


def can_see_task(member: Member, kind: str, owner_id: int) -> bool:
    """Exports (and their files) are their owner's alone; reminders and imports are staff work."""
    if kind == TaskKind.EXPORT:
        return owner_id == member.user_id
    if kind == TaskKind.REMINDER:
        return member.is_staff
    if kind == TaskKind.IMPORT:
        return member.is_admin or (member.is_staff and owner_id == member.user_id)
    return owner_id == member.user_id


def task_visibility_sql(member: Member) -> tuple[str, dict[str, object]]:
    """The same rule as `can_see_task`, as a WHERE fragment for lists."""
    if member.is_admin:
        return "(kind IN ('REMINDER', 'IMPORT') OR owner_id = :me)", {"me": member.user_id}
    if member.is_staff:
        return (
            "(kind = 'REMINDER' OR owner_id = :me)",
            {"me": member.user_id},
        )
    return "(kind IN ('EXPORT', 'NOOP') AND owner_id = :me)", {"me": member.user_id}
