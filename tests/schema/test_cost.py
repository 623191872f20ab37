"""What one request may cost: the cost budget, batched relations, the per-request connection
ceiling, the statement timeout and the response-size ceiling (issue 12, points 2 and 9)."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy as sa

from desk.work import reminders
from tests.counting import engine_statements as counting
from tests.helpers import wait_for

PAGE = """query($t: ID!) { tickets(teamId: $t, first: 200) { nodes {
  id pendingReminder { id } team { members { role } } creator { displayName }
  assignee { displayName }
} } }"""

ALIASED = (
    "query($t: ID!) {"
    + " ".join(
        f"a{i}: tickets(teamId: $t, first: 200) "
        "{ nodes { id pendingReminder { id } team { members { role } } } }"
        for i in range(30)
    )
    + "}"
)


async def _many_tickets(rt, world, n: int, *, body: str = "", creator: int | None = None) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, body, creator_id, assignee_id) "
                "SELECT :t, 'bulk ' || g, :body, :c, :a FROM generate_series(1, :n) g"
            ),
            {
                "t": world.team,
                "n": n,
                "body": body,
                "c": creator or world.customer,
                "a": world.staff,
            },
        )


async def test_a_page_of_200_tickets_with_every_relation_takes_a_handful_of_statements(
    api, rt, world
) -> None:
    await _many_tickets(rt, world, 200)
    for ticket in list(world.tickets.values())[:2]:
        await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=30)
    with counting(api.rt.engine) as statements:
        body = await api(PAGE, {"t": world.team}, user=world.staff)
    assert "errors" not in body, body
    nodes = body["data"]["tickets"]["nodes"]
    assert len(nodes) == 200
    # membership, count, page; then one batch each: reminders, members (+ its membership),
    # users; teams (+1 if identifying the caller reads the database)
    assert len(statements) <= 9, statements


async def test_thirty_aliases_of_a_full_page_are_refused_by_the_budget_before_any_sql(
    api, rt, world
) -> None:
    await _many_tickets(rt, world, 200)
    started = time.perf_counter()
    with counting(api.rt.engine) as statements:
        body = await api(ALIASED, {"t": world.team}, user=world.staff)
    elapsed = time.perf_counter() - started
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "QUERY_TOO_COSTLY", error
    assert error["extensions"]["cost"] > error["extensions"]["budget"] == 10_000
    assert not [s for s in statements if "ticket" in s], statements  # refused before running
    assert elapsed < 5, elapsed


async def test_one_full_page_is_within_the_budget_and_variables_count(api, world) -> None:
    small = await api(
        "query($t: ID!, $n: Int!) { tickets(teamId: $t, first: $n) { nodes { id } } }",
        {"t": world.team, "n": 200},
        user=world.staff,
    )
    assert "errors" not in small, small
    fragments = (
        "query($t: ID!, $n: Int!) { ...F a: tickets(teamId: $t, first: $n) { ...N } } "
        "fragment F on Query { tickets(teamId: $t, first: $n) { ...N } } "
        "fragment N on TicketConnection { nodes { id team { members { user { id } role } } } }"
    )
    body = await api(fragments, {"t": world.team, "n": 200}, user=world.staff)
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COSTLY", body
    # One document text, cached once parsed and validated: its cost is still each request's.
    cheap = await api(fragments, {"t": world.team, "n": 2}, user=world.staff)
    assert "errors" not in cheap, cheap
    again = await api(fragments, {"t": world.team, "n": 200}, user=world.staff)
    assert again["errors"][0]["extensions"]["code"] == "QUERY_TOO_COSTLY", again


async def test_a_heavy_request_leaves_the_pool_to_its_neighbours(make_api, rt, world) -> None:
    """With the budget lifted, 30 aliases still hold at most GRAPHQL_REQUEST_CONNECTIONS of the
    pool, so another person's request answers meanwhile."""
    await _many_tickets(rt, world, 200)
    async with make_api(
        graphql_max_cost=1_000_000,
        db_pool_size=3,
        graphql_request_connections=2,
    ) as api:
        heavy = asyncio.create_task(api.post(ALIASED, {"t": world.team}, user=world.staff))

        async def heavy_holds_connections() -> bool:
            return heavy.done() or api.rt.pg.in_use() > 0

        # The neighbour asks only once the heavy request is at work on the database.
        await wait_for(heavy_holds_connections, timeout=60, what="the heavy request's first read")
        started = time.perf_counter()
        neighbour = await api("{ ticket(id: 1) { id } }", user=world.admin)
        neighbour_took = time.perf_counter() - started
        response = await asyncio.wait_for(heavy, timeout=120)
    assert "errors" not in neighbour, neighbour
    assert response.status_code == 200, response.text[:500]
    data = response.json()
    assert "errors" not in data, str(data)[:500]
    assert len(data["data"]["a29"]["nodes"]) == 200
    assert neighbour_took < 15, neighbour_took


async def test_the_web_cancels_a_statement_over_the_timeout(make_api) -> None:
    async with make_api(web_statement_timeout_ms=200) as api, api.rt.engine.connect() as conn:
        with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
            await conn.execute(sa.text("SELECT pg_sleep(3)"))


async def test_a_customers_big_tickets_times_aliases_are_refused_not_sent(api, rt, world) -> None:
    await _many_tickets(rt, world, 20, body="x" * 100_000, creator=world.customer)
    query = (
        "query($t: ID!) {"
        + " ".join(
            f"a{i}: tickets(teamId: $t, first: 20) {{ nodes {{ body }} }}" for i in range(30)
        )
        + "}"
    )
    response = await api.post(query, {"t": world.team}, user=world.customer)
    assert response.status_code == 200
    assert len(response.content) < 100_000, len(response.content)
    codes = {e["extensions"]["code"] for e in response.json()["errors"]}
    assert codes == {"RESPONSE_TOO_LARGE"}, response.text[:500]
    one = await api("query($t: ID!) { tickets(teamId: $t, first: 20) { nodes { body } } }",
                    {"t": world.team}, user=world.customer)  # fmt: skip
    assert len(one["data"]["tickets"]["nodes"]) == 20  # 2 MB: within the ceiling


async def test_a_statement_over_the_timeout_answers_timeout_without_sql(make_api, world) -> None:
    """A query stuck behind a lock is cancelled by the web's statement timeout; the client gets
    TIMEOUT and a plain message in dev too, never the statement or its parameters."""
    async with make_api(web_statement_timeout_ms=300) as api:
        locker = await api.rt.engine.connect()  # (no timeout for this one: it holds the lock)
        try:
            await locker.exec_driver_sql("SET statement_timeout = 0")
            await locker.exec_driver_sql("LOCK TABLE ticket IN ACCESS EXCLUSIVE MODE")
            started = time.perf_counter()
            response = await api.post(
                "query($t: ID!) { tickets(teamId: $t) { totalCount } }",
                {"t": world.team},
                user=world.staff,
            )
            elapsed = time.perf_counter() - started
        finally:
            await locker.rollback()
            await locker.close()
    codes = {e["extensions"]["code"] for e in response.json()["errors"]}
    assert codes == {"TIMEOUT"}, response.text
    for leak in ("SELECT", "ticket t", "psycopg", "canceling statement", "%("):
        assert leak not in response.text, response.text
    assert elapsed < 10, elapsed


@pytest.mark.parametrize(
    ("declared", "variables"),
    [
        ("$n: Int! = 200", {}),  # left out: the declared default runs
        ("$n: Int!", {"n": 200.0}),  # an integral float is coerced to Int 200
    ],
)
async def test_first_from_a_variable_default_or_a_float_counts_at_its_real_size(
    api, world, declared: str, variables: dict
) -> None:
    query = (
        f"query($t: ID!, {declared}) {{"
        + " ".join(
            f"a{i}: tickets(teamId: $t, first: $n) {{ nodes {{ id team {{ members {{ role }} }} }} }}"
            for i in range(30)
        )
        + "}"
    )
    body = await api(query, {"t": world.team, **variables}, user=world.staff)
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COSTLY", body


async def test_a_field_repeated_hundreds_of_times_is_refused_before_validation_work(
    api, world
) -> None:
    # 490 `me { id }` fit the token limit; the standard overlapping-fields rule compares every
    # pair and held the event loop for over a second.
    started = time.perf_counter()
    body = await api("{ " + "me { id } " * 490 + "}", {}, user=world.staff)
    elapsed = time.perf_counter() - started
    (error,) = body["errors"]
    assert "asked for more than 10 times" in error["message"], error
    assert elapsed < 0.5, elapsed
    through_fragments = (
        "query { ...A ...B } fragment A on Query { " + "me { id } " * 6 + "} "
        "fragment B on Query { " + "me { id } " * 6 + "}"
    )
    body = await api(through_fragments, {}, user=world.staff)
    assert "asked for more than 10 times" in body["errors"][0]["message"], body
    body = await api("{ me { id } me { id } }", {}, user=world.staff)
    assert "errors" not in body, body
