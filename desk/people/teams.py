"""Teams: created by site operators only (the operators' console, or `taskdesk teams create`, which
acts as the command line's operator). A team's first admin comes in by invitation
(desk.work.onboarding.create_team); names are unique, whatever their case.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.people import audit, operators

MAX_NAME = 200


@dataclass(frozen=True)
class TeamRow:
    id: int
    name: str


def clean_name(name: object) -> str:
    name = inputs.line("name", name if isinstance(name, str) else "", max_len=MAX_NAME)
    if not name:
        raise ValidationProblem("name", "give the team a name (1 to 200 characters)")
    return name


async def require_operator(conn: AsyncConnection, user_id: int | None) -> None:
    """Only operators (or the command line, `user_id` None) create teams; anyone else is told
    the page does not exist, as the console tells them."""
    if user_id is not None and not await operators.is_operator(conn, user_id):
        raise NotFound()


async def create(
    conn: AsyncConnection, *, name: str, actor_id: int | None, actor: str, now: datetime
) -> TeamRow:
    """Insert the team in the caller's transaction (audited); a taken name is a clear error."""
    name = clean_name(name)
    await require_operator(conn, actor_id)
    taken = await conn.execute(
        sa.text("SELECT 1 FROM team WHERE lower(name) = lower(:n)"), {"n": name}
    )
    row = None
    if taken.first() is None:
        row = (
            await conn.execute(
                sa.text(
                    "INSERT INTO team (name, created_at) VALUES (:n, :now) "
                    "ON CONFLICT (name) DO NOTHING RETURNING id, name"
                ),
                {"n": name, "now": now},
            )
        ).first()
    if row is None:
        raise ValidationProblem("name", "a team with that name already exists; choose another")
    team = TeamRow(int(row.id), str(row.name))
    await audit.record(
        conn,
        at=now,
        actor_id=actor_id,
        actor=actor,
        action="team_create",
        team_id=team.id,
        detail=team.name,
    )
    return team


async def by_name(conn: AsyncConnection, name: str) -> TeamRow:
    """The team with this name (any case), for the command line."""
    name = inputs.line("team", name or "", max_len=MAX_NAME)
    row = (
        await conn.execute(
            sa.text("SELECT id, name FROM team WHERE lower(name) = lower(:n)"), {"n": name}
        )
    ).first()
    if row is None:
        raise NotFound(f"No team is called {name!r}.")
    return TeamRow(int(row.id), str(row.name))


@dataclass(frozen=True)
class TeamSummary:
    id: int
    name: str
    members: int
    created_at: datetime


async def list_all(rt: Runtime) -> list[TeamSummary]:
    """Every team with its member count (the operators' console)."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT t.id, t.name, t.created_at, count(m.user_id) AS members FROM team t "
                "LEFT JOIN membership m ON m.team_id = t.id GROUP BY t.id ORDER BY lower(t.name)"
            )
        )
        return [TeamSummary(r.id, r.name, int(r.members), r.created_at) for r in rows]
