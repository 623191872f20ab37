"""Batch reads for GraphQL DataLoaders (the per-task answers live in `desk.ledger.rules`).

Each batch function opens its own connection, so loaders running concurrently never share one,
and applies the same visibility rules as `desk.people.access` (a ticket or team the caller may not see
is simply absent from the answer, exactly as a missing one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from desk.core.errors import NotFound
from desk.core.models import Role, Ticket
from desk.core.runtime import Runtime
from desk.helpdesk.tickets import TICKET_COLUMNS
from desk.ledger.rules import TaskLike, can_cancel, can_retry, export_downloadable
from desk.people import access

# Ids are int4 columns: a larger number can only be "not found", never a database error.
MAX_ID = 2**31 - 1


def parse_id(value: object) -> int | None:
    """A positive int4 id from client input ("42" or 42), or None for anything else."""
    text = str(value).strip()
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    n = int(text)
    return n if 1 <= n <= MAX_ID else None


def require_id(value: object, what: str) -> int:
    """`parse_id`, or NotFound ("Task not found.") for anything that cannot be an id: an
    odd id answers exactly as a missing one."""
    found = parse_id(value)
    if found is None:
        raise NotFound(f"{what} not found.")
    return found


@dataclass(frozen=True)
class UserName:
    id: int
    display_name: str


@dataclass(frozen=True)
class TeamView:
    """A team as one of its members sees it (with that member's role)."""

    id: int
    name: str
    role: Role


async def users_by_id(rt: Runtime, ids: Sequence[int]) -> dict[int, UserName]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT id, display_name FROM app_user WHERE id = ANY(:ids)"),
            {"ids": list(ids)},
        )
        return {r.id: UserName(r.id, r.display_name) for r in rows}


async def visible_tickets(rt: Runtime, user_id: int, ids: Sequence[int]) -> dict[int, Ticket]:
    """The tickets among `ids` that `user_id` may see (access.can_see_ticket)."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                f"SELECT {TICKET_COLUMNS}, m.role AS member_role FROM ticket t "
                "JOIN membership m ON m.team_id = t.team_id AND m.user_id = :u "
                "WHERE t.id = ANY(:ids)"
            ),
            {"u": user_id, "ids": list(ids)},
        )
        out: dict[int, Ticket] = {}
        for r in rows:
            data = dict(r._mapping)
            member = access.Member(user_id, data["team_id"], Role(data.pop("member_role")))
            if access.can_see_ticket(member, data["creator_id"]):
                out[data["id"]] = Ticket(**data)
        return out


async def member_teams(rt: Runtime, user_id: int, ids: Sequence[int]) -> dict[int, TeamView]:
    """The teams among `ids` that `user_id` belongs to, with the role held in each."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT t.id, t.name, m.role FROM team t "
                "JOIN membership m ON m.team_id = t.id AND m.user_id = :u WHERE t.id = ANY(:ids)"
            ),
            {"u": user_id, "ids": list(ids)},
        )
        return {r.id: TeamView(r.id, r.name, Role(r.role)) for r in rows}


__all__ = ["TaskLike", "can_cancel", "can_retry", "export_downloadable"]
