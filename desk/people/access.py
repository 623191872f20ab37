"""Who may see and do what (docs/architecture.md, "Visibility"). Membership is read from the
database on every call.

Who may see a task is written once, as data: `TASK_REACH`, role and kind -> whose tasks. Both forms
the code needs are made from it — `can_see_task`, the predicate for a task already read, and
`task_visibility_sql`, the same rule as a SQL condition for lists that must filter before their
LIMIT — so the two cannot disagree (tests/desk/reads/test_reads.py walks the whole matrix)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import sqlalchemy as sa
from psycopg import sql
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
        return self.role.is_staff

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


class Reach(Enum):
    """Whose tasks of a kind a role sees."""

    ALL = "all"  # every task of the kind in the team
    OWN = "own"  # only the ones the reader owns
    NONE = "none"


# The rule: exports (and their files) are their owner's alone; reminders are staff work; an
# admin sees every import of the team, staff their own; a test task is its owner's. An e-mail is
# nobody's to follow in the team's task lists (it may carry a single-use link; people get the news
# itself): only the operators' console shows it.
TASK_REACH: dict[Role, dict[TaskKind, Reach]] = {
    Role.ADMIN: {
        TaskKind.EXPORT: Reach.OWN,
        TaskKind.REMINDER: Reach.ALL,
        TaskKind.IMPORT: Reach.ALL,
        TaskKind.NOOP: Reach.OWN,
        TaskKind.EMAIL: Reach.NONE,
        # A mailbox's fetch and parse: admins manage mailboxes (docs/architecture.md, "Mail in").
        TaskKind.MAIL_FETCH: Reach.ALL,
        TaskKind.MAIL_PARSE: Reach.ALL,
        # A ticket's SLA timers and the team's time-rule runs: the team's own clocks, which
        # staff work by (docs/architecture.md, "Business hours"); customers never see them.
        TaskKind.SLA_TIMER: Reach.ALL,
        TaskKind.TIME_RULE: Reach.ALL,
    },
    Role.STAFF: {
        TaskKind.EXPORT: Reach.OWN,
        TaskKind.REMINDER: Reach.ALL,
        TaskKind.IMPORT: Reach.OWN,
        TaskKind.NOOP: Reach.OWN,
        TaskKind.EMAIL: Reach.NONE,
        TaskKind.MAIL_FETCH: Reach.NONE,
        TaskKind.MAIL_PARSE: Reach.NONE,
        TaskKind.SLA_TIMER: Reach.ALL,
        TaskKind.TIME_RULE: Reach.ALL,
    },
    Role.CUSTOMER: {
        TaskKind.EXPORT: Reach.OWN,
        TaskKind.REMINDER: Reach.NONE,
        TaskKind.IMPORT: Reach.NONE,
        TaskKind.NOOP: Reach.OWN,
        TaskKind.EMAIL: Reach.NONE,
        TaskKind.MAIL_FETCH: Reach.NONE,
        TaskKind.MAIL_PARSE: Reach.NONE,
        TaskKind.SLA_TIMER: Reach.NONE,
        TaskKind.TIME_RULE: Reach.NONE,
    },
}
# The rule as two sets of (role, kind): one look-up per row on the hot paths.
_SEES_ALL = frozenset(
    (r, k) for r, ks in TASK_REACH.items() for k, v in ks.items() if v is Reach.ALL
)
_SEES_OWN = frozenset(
    (r, k) for r, ks in TASK_REACH.items() for k, v in ks.items() if v is Reach.OWN
)


def can_see_task(member: Member, kind: str, owner_id: int) -> bool:
    """`TASK_REACH` for a task already read (a kind outside TaskKind is seen by nobody)."""
    if (member.role, kind) in _SEES_ALL:
        return True
    return owner_id == member.user_id and (member.role, kind) in _SEES_OWN


def _kinds(role: Role, reach: Reach) -> sql.Composable:
    return sql.SQL(", ").join(
        sql.Literal(str(k)) for k, v in TASK_REACH[role].items() if v is reach
    )


def _role_condition(
    role: Role, kind: sql.Composable, owner: sql.Composable, reader: sql.Composable
) -> sql.Composable:
    parts: list[sql.Composable] = []
    if any(v is Reach.ALL for v in TASK_REACH[role].values()):
        parts.append(sql.SQL("{} IN ({})").format(kind, _kinds(role, Reach.ALL)))
    if any(v is Reach.OWN for v in TASK_REACH[role].values()):
        own = sql.SQL("({} IN ({}) AND {} = {})")
        parts.append(own.format(kind, _kinds(role, Reach.OWN), owner, reader))
    return sql.SQL(" OR ").join(parts) if parts else sql.SQL("false")


def task_visibility_sql(
    role: sql.Composable, kind: sql.Composable, owner: sql.Composable, reader: sql.Composable
) -> sql.Composable:
    """`TASK_REACH` as a SQL condition over the reader's `role` (a membership's role column:
    NULL, not a member, sees nothing), the task's `kind` and `owner`, and the `reader`'s id."""
    whens = sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}").format(
            sql.Literal(str(r)), _role_condition(r, kind, owner, reader)
        )
        for r in TASK_REACH
    )
    return sql.SQL("CASE {} {} ELSE false END").format(role, whens)
