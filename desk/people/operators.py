"""Who operates: site operators (granted from the command line only) and the console's scope.

An operator sees every team; a team admin sees the console for the teams they administer;
anyone else is told the address does not exist (`NotFound`), exactly like an unknown page.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import NotFound
from desk.core.runtime import Runtime
from desk.people import audit


@dataclass(frozen=True)
class Scope:
    """What one person may see and steer in the console."""

    user_id: int
    actor: str  # e-mail, written in the audit trail
    operator: bool
    team_ids: tuple[int, ...]  # the administered teams (an operator: empty, meaning all)

    def covers(self, team_id: int | None) -> bool:
        return self.operator or (team_id is not None and team_id in self.team_ids)

    def sql(self, column: str = "b.team_id") -> tuple[str, dict[str, object]]:
        """A WHERE fragment restricting rows to this scope (bind name: scope_teams)."""
        if self.operator:
            return "true", {}
        return f"{column} = ANY(:scope_teams)", {"scope_teams": list(self.team_ids)}


async def scope_of(rt: Runtime, user_id: int) -> Scope:
    """The console scope of a signed-in user; NotFound for anyone who may not see it."""
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "SELECT u.email, EXISTS (SELECT 1 FROM site_operator o WHERE o.user_id = u.id) "
                    " AS operator, coalesce(array_agg(m.team_id ORDER BY m.team_id) "
                    "  FILTER (WHERE m.role = 'ADMIN'), '{}') AS teams "
                    "FROM app_user u LEFT JOIN membership m ON m.user_id = u.id "
                    "WHERE u.id = :u GROUP BY u.id"
                ),
                {"u": user_id},
            )
        ).first()
    if row is None or not (row.operator or row.teams):
        raise NotFound()
    return Scope(user_id, row.email, bool(row.operator), tuple(row.teams))


async def is_operator(conn: AsyncConnection, user_id: int) -> bool:
    found = await conn.execute(
        sa.text("SELECT 1 FROM site_operator WHERE user_id = :u"), {"u": user_id}
    )
    return found.first() is not None


async def _user(conn: AsyncConnection, email: str) -> tuple[int, str]:
    row = (
        await conn.execute(
            sa.text("SELECT id, email FROM app_user WHERE lower(email) = lower(:e)"),
            {"e": email.strip()},
        )
    ).first()
    if row is None:
        raise NotFound(f"No user with email {email}.")
    return int(row.id), str(row.email)


async def add(rt: Runtime, email: str) -> bool:
    """Make a user an operator; False when they already were. Audited as done by the CLI."""
    async with rt.engine.begin() as conn:
        user_id, found = await _user(conn, email)
        inserted = await conn.execute(
            sa.text(
                "INSERT INTO site_operator (user_id, created_at) VALUES (:u, :now) "
                "ON CONFLICT DO NOTHING RETURNING user_id"
            ),
            {"u": user_id, "now": rt.clock()},
        )
        if inserted.first() is None:
            return False
        await audit.record(
            conn, at=rt.clock(), actor_id=None, actor="cli", action="operator_add", detail=found
        )
    return True


async def remove(rt: Runtime, email: str) -> bool:
    """Take the role away; False when the user was not an operator."""
    async with rt.engine.begin() as conn:
        user_id, found = await _user(conn, email)
        gone = await conn.execute(
            sa.text("DELETE FROM site_operator WHERE user_id = :u RETURNING user_id"),
            {"u": user_id},
        )
        if gone.first() is None:
            return False
        await audit.record(
            conn, at=rt.clock(), actor_id=None, actor="cli", action="operator_remove", detail=found
        )
    return True


@dataclass(frozen=True)
class OperatorRow:
    email: str
    display_name: str
    since: object


async def list_all(rt: Runtime) -> list[OperatorRow]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT u.email, u.display_name, o.created_at FROM site_operator o "
                "JOIN app_user u ON u.id = o.user_id ORDER BY lower(u.email)"
            )
        )
        return [OperatorRow(r.email, r.display_name, r.created_at) for r in rows]
