"""Lists load their relations in batches: the number of SQL statements does not grow with the
number of rows."""

from __future__ import annotations

from desk.work import reminders
from tests.counting import engine_statements as counting
from tests.factories import add_ticket

TASKS = """query($t: ID!, $n: Int!) { tasks(teamId: $t, first: $n) { edges { node {
  id statusLabel owner { displayName } ticket { title creator { displayName } team { name } }
  team { name }
} } } }"""

TICKETS = """query($t: ID!, $n: Int!) { tickets(teamId: $t, first: $n) { edges { node {
  title creator { displayName } assignee { displayName } team { name }
} } } }"""


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
