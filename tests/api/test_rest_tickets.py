"""Tickets over REST: one ticket and a team's list with the filters the list and exports share;
the SLA fields (sla_due_at, sla_breached_at, sla_state at the request's clock) for staff and
admins, null for customers, whose `sla` filter is a 422 naming it; a ticket or team not yours
is a 404 exactly like a missing one."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.api.tokens import bearer


async def _set_sla(rt, ticket_id: int, due: datetime | None, breached: datetime | None) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET sla_due_at = :d, sla_breached_at = :b WHERE id = :id"),
            {"d": due, "b": breached, "id": ticket_id},
        )


async def _scene(client, world, clock) -> None:
    now = clock()
    await _set_sla(client.rt, world.tickets["login"], now + timedelta(minutes=42), None)
    await _set_sla(client.rt, world.tickets["printer"], None, now - timedelta(hours=3))


@pytest.mark.parametrize("role", ["staff", "admin"])
async def test_staff_read_the_sla_fields(client, world, clock, role) -> None:
    await _scene(client, world, clock)
    h = await bearer(client, getattr(world, role))
    r = await client.get(f"/api/v1/tickets/{world.tickets['login']}", headers=h)
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["ticket_id"] == world.tickets["login"] and got["title"] == "Cannot log in"
    assert got["sla_state"] == "DUE_SOON" and got["sla_breached_at"] is None
    assert datetime.fromisoformat(got["sla_due_at"]) == clock() + timedelta(minutes=42)
    printer = (await client.get(f"/api/v1/tickets/{world.tickets['printer']}", headers=h)).json()
    assert printer["sla_state"] == "BREACHED" and printer["sla_due_at"] is None
    resolved = (await client.get(f"/api/v1/tickets/{world.tickets['resolved']}", headers=h)).json()
    assert resolved["sla_state"] == "NONE"
    clock.advance(3600)  # read at the request's clock: past due is breached
    again = (await client.get(f"/api/v1/tickets/{world.tickets['login']}", headers=h)).json()
    assert again["sla_state"] == "BREACHED"


async def test_customers_get_null_and_their_own_only(client, world, clock) -> None:
    await _scene(client, world, clock)
    h = await bearer(client, world.customer)
    r = await client.get(f"/api/v1/tickets/{world.tickets['login']}", headers=h)
    assert r.status_code == 200
    got = r.json()
    assert (got["sla_due_at"], got["sla_breached_at"], got["sla_state"]) == (None, None, None)
    # Someone else's ticket, and another team's: as missing ones.
    for other in (world.tickets["printer"], world.tickets["globex"], 999_999):
        r = await client.get(f"/api/v1/tickets/{other}", headers=h)
        assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"
    listed = await client.get("/api/v1/tickets", params={"team_id": world.team}, headers=h)
    assert listed.status_code == 200
    items = listed.json()["items"]
    assert items and all(i["creator_id"] == world.customer for i in items)
    assert all(i["sla_state"] is None for i in items)
    refused = await client.get(
        "/api/v1/tickets", params={"team_id": world.team, "sla": "BREACHED"}, headers=h
    )
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "sla"


async def test_the_list_filters_and_pages(client, world, clock) -> None:
    await _scene(client, world, clock)
    h = await bearer(client, world.staff)
    url = "/api/v1/tickets"
    r = await client.get(url, params={"team_id": world.team, "sla": "BREACHED"}, headers=h)
    assert r.status_code == 200, r.text
    assert [i["ticket_id"] for i in r.json()["items"]] == [world.tickets["printer"]]
    r = await client.get(url, params={"team_id": world.team, "sla": "DUE_SOON"}, headers=h)
    assert [i["ticket_id"] for i in r.json()["items"]] == [world.tickets["login"]]
    r = await client.get(
        url, params={"team_id": world.team, "status": ["OPEN"], "assignee_id": world.staff},
        headers=h,
    )  # fmt: skip
    assert [i["ticket_id"] for i in r.json()["items"]] == [world.tickets["login"]]
    first = (await client.get(url, params={"team_id": world.team, "first": 2}, headers=h)).json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = await client.get(
        url, params={"team_id": world.team, "first": 2, "after": first["next_cursor"]}, headers=h
    )
    seen = [i["ticket_id"] for i in first["items"] + rest.json()["items"]]
    assert len(seen) == len(set(seen)) == 4  # the team's four, none twice
    # Another team, a bad filter, a bad cursor: 404 and 422s naming the part.
    r = await client.get(url, params={"team_id": world.other_team}, headers=h)
    assert r.status_code == 404
    r = await client.get(url, params={"team_id": world.team, "sla": "LATE"}, headers=h)
    assert r.status_code == 422
    r = await client.get(url, params={"team_id": world.team, "after": "nope"}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["field"] == "after"


async def test_anonymous_is_refused(client, world) -> None:
    r = await client.get(f"/api/v1/tickets/{world.tickets['login']}")
    assert r.status_code == 401
