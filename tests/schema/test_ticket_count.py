"""`tickets { totalCount totalCountIsExact }` (issue 11): counted only when selected (directly or
through a fragment), capped at desk.helpdesk.tickets.COUNT_CAP and then flagged as not exact."""

from __future__ import annotations

from typing import Any

import pytest

from desk.helpdesk import tickets
from tests.factories import add_ticket

COUNTED = "count(*) AS n FROM (SELECT 1 FROM ticket"


@pytest.fixture
def statements(api, monkeypatch) -> list[str]:
    """The SQL the app's hot-path pool runs (each still runs, on the real database)."""
    seen: list[str] = []
    pg = api.rt.pg
    for name in ("one", "all"):
        real = getattr(pg, name)

        async def spy(sql: str, params: Any = None, _real: Any = real) -> Any:
            seen.append(sql)
            return await _real(sql, params)

        monkeypatch.setattr(pg, name, spy)
    return seen


@pytest.mark.parametrize(
    ("selection", "counted"),
    [
        ("edges { node { id } }", False),
        ("pageInfo { hasNextPage } nodes { title }", False),
        ("totalCount", True),
        ("n: totalCountIsExact", True),
        ("...on TicketConnection { totalCount }", True),
        ("...Counted", True),
    ],
)
async def test_the_count_runs_only_when_selected(api, world, statements, selection, counted):
    counted_fragment = "fragment Counted on TicketConnection { totalCount }"
    fragment = counted_fragment if "...Counted" in selection else ""
    query = f"query($t: ID!) {{ tickets(teamId: $t) {{ {selection} }} }} {fragment}"
    body = await api(query, {"t": world.team}, user=world.staff)
    assert "errors" not in body, body
    assert any(COUNTED in s for s in statements) is counted, statements


async def test_a_count_above_the_cap_says_so(api, world, rt, monkeypatch) -> None:
    query = """query($t: ID!, $q: String) { tickets(teamId: $t, filter: {q: $q}) {
      totalCount totalCountIsExact nodes { title } } }"""
    for i in range(3):
        await add_ticket(rt, world.team, world.customer, f"退款 {i}")
    monkeypatch.setattr(tickets, "COUNT_CAP", 2)
    many = (await api(query, {"t": world.team, "q": "退款"}, user=world.staff))["data"]
    assert many["tickets"]["totalCount"] == 2 and not many["tickets"]["totalCountIsExact"]
    assert len(many["tickets"]["nodes"]) == 3
    few = (await api(query, {"t": world.team, "q": "退款 1"}, user=world.staff))["data"]
    assert few["tickets"]["totalCount"] == 1 and few["tickets"]["totalCountIsExact"]
    # Customers count only their own, and a team you are not in counts nothing.
    mine = (await api(query, {"t": world.team, "q": "退款"}, user=world.customer2))["data"]
    assert mine["tickets"] == {"totalCount": 0, "totalCountIsExact": True, "nodes": []}
    other = (await api(query, {"t": world.team, "q": "退款"}, user=world.outsider))["data"]
    assert other["tickets"] == {"totalCount": 0, "totalCountIsExact": True, "nodes": []}
