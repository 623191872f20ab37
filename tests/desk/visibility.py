"""Who reads the task ledger in the visibility tests: the people, a task id nobody has, and one
task of every kind owned by each Acme person (the `ledger` fixture of tests/desk/conftest.py)."""

from __future__ import annotations

import itertools

import sqlalchemy as sa

from desk.core.runtime import Runtime
from tests.factories import World

MISSING = 99_999
PEOPLE = ("admin", "staff", "customer", "customer2", "outsider")
KINDS = (
    "EXPORT",
    "REMINDER",
    "IMPORT",
    "NOOP",
    "EMAIL",
    "MAIL_FETCH",
    "MAIL_PARSE",
    "SLA_TIMER",
    "TIME_RULE",
)


async def insert_task(rt: Runtime, kind: str, team: int, owner: int, ticket: int | None) -> int:
    async with rt.engine.begin() as conn:
        return int(
            (
                await conn.execute(
                    sa.text(
                        "INSERT INTO background_task (kind, team_id, owner_id, ticket_id, "
                        "scope_key) VALUES (:k, :t, :o, :tk, gen_random_uuid()::text) RETURNING id"
                    ),
                    {"k": kind, "t": team, "o": owner, "tk": ticket},
                )
            ).scalar_one()
        )


async def make_ledger(rt: Runtime, world: World) -> dict[tuple[str, str], int]:
    """One task of every kind owned by each Acme person: (kind, owner) -> id."""
    out = {}
    for kind, who in itertools.product(KINDS, ("admin", "staff", "customer")):
        ticket = world.tickets["login"] if kind == "REMINDER" else None
        out[(kind, who)] = await insert_task(rt, kind, world.team, getattr(world, who), ticket)
    return out
