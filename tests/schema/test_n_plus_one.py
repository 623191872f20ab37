"""Lists load their relations in batches: the number of SQL statements does not grow with the
number of rows."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from desk.work import reminders
from tests.factories import add_ticket

TASKS = """query($t: ID!, $n: Int!) { tasks(teamId: $t, first: $n) { edges { node {
  id statusLabel owner { displayName } ticket { title creator { displayName } team { name } }
  team { name }
} } } }"""

TICKETS = """query($t: ID!, $n: Int!) { tickets(teamId: $t, first: $n) { edges { node {
  title creator { displayName } assignee { displayName } team { name }
} } } }"""


@contextmanager
def counting(engine: sa.ext.asyncio.AsyncEngine) -> Iterator[list[str]]:
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if "FROM web_session" not in statement:  # the cookie's session lookup: once a request
            statements.append(statement)

    sa.event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        sa.event.remove(engine.sync_engine, "before_cursor_execute", count)


async def _reminders(rt, world, n: int) -> None:
    """n reminders (one per ticket), by two owners, so owners and tickets vary."""
    for i in range(n):
        ticket = await add_ticket(
            rt, world.team, world.customer, f"ticket {i}", assignee=world.staff
        )
        owner = world.staff if i % 2 else world.admin
        await reminders.schedule_reminder(rt, owner, ticket, in_minutes=10 + i)


async def _statements(api, query: str, team: int, user: int, n: int) -> list[str]:
    with counting(api.rt.engine) as statements:
        body = await api(query, {"t": team, "n": n}, user=user)
    assert "errors" not in body, body
    (listing,) = body["data"].values()
    assert len(listing["edges"]) == n
    return statements


async def test_fifty_tasks_with_owner_and_ticket(api, rt, world) -> None:
    await _reminders(rt, world, 50)
    few = await _statements(api, TASKS, world.team, world.admin, 5)
    many = await _statements(api, TASKS, world.team, world.admin, 50)
    # membership + page, then one batch each for owners, tickets and teams (+ creators)
    assert len(many) == len(few) <= 6, many


async def test_tickets_with_people(api, rt, world) -> None:
    for i in range(40):
        await add_ticket(rt, world.team, world.customer2, f"more {i}", assignee=world.admin)
    few = await _statements(api, TICKETS, world.team, world.staff, 5)
    many = await _statements(api, TICKETS, world.team, world.staff, 44)
    assert len(many) == len(few) <= 6, many
