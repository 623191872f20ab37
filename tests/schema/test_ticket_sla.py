"""A ticket's SLA over GraphQL: `slaDueAt`, `slaBreachedAt` and `slaState` (read at the request's
clock) for staff and admins, null for customers; the `sla` filter of `tickets`, which a
customer is refused (a typed VALIDATION naming `sla`). The columns are set directly: what fills
them (the SLA timers) is tested on its own."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

ONE = "query($id: ID!) { ticket(id: $id) { id slaDueAt slaBreachedAt slaState } }"
LIST = (
    "query($t: ID!, $f: TicketFilterInput) { tickets(teamId: $t, filter: $f, first: 50) "
    "{ totalCount nodes { id slaState } } }"
)


async def _set_sla(rt, ticket_id: int, due: datetime | None, breached: datetime | None) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET sla_due_at = :d, sla_breached_at = :b WHERE id = :id"),
            {"d": due, "b": breached, "id": ticket_id},
        )


async def _scene(rt, world, clock) -> dict[str, int]:
    now = clock()
    t = world.tickets
    await _set_sla(rt, t["login"], now + timedelta(minutes=42), None)  # due soon
    await _set_sla(rt, t["printer"], now + timedelta(hours=3), None)  # running
    await _set_sla(rt, t["formula"], None, now - timedelta(hours=3))  # breached
    return {"soon": t["login"], "running": t["printer"], "breached": t["formula"]}


@pytest.mark.parametrize("role", ["staff", "admin"])
async def test_staff_read_the_sla_fields(api, rt, world, clock, role) -> None:
    ids = await _scene(rt, world, clock)
    user = getattr(world, role)
    got = (await api(ONE, {"id": ids["soon"]}, user=user))["data"]["ticket"]
    assert got["slaState"] == "DUE_SOON"
    assert datetime.fromisoformat(got["slaDueAt"]) == clock() + timedelta(minutes=42)
    assert got["slaBreachedAt"] is None
    breached = (await api(ONE, {"id": ids["breached"]}, user=user))["data"]["ticket"]
    assert breached["slaState"] == "BREACHED" and breached["slaDueAt"] is None
    assert datetime.fromisoformat(breached["slaBreachedAt"]) == clock() - timedelta(hours=3)
    running = (await api(ONE, {"id": ids["running"]}, user=user))["data"]["ticket"]
    assert running["slaState"] == "RUNNING"
    none = (await api(ONE, {"id": world.tickets["resolved"]}, user=user))["data"]["ticket"]
    assert (none["slaState"], none["slaDueAt"], none["slaBreachedAt"]) == ("NONE", None, None)


async def test_the_state_follows_the_requests_clock(api, rt, world, clock) -> None:
    ids = await _scene(rt, world, clock)
    clock.advance(2 * 3600)  # the running one is due within the hour now; the due-soon one past
    got = {
        k: (await api(ONE, {"id": i}, user=world.staff))["data"]["ticket"]["slaState"]
        for k, i in ids.items()
    }
    # A due instant already past reads as breached before any breach is recorded.
    assert got == {"soon": "BREACHED", "running": "DUE_SOON", "breached": "BREACHED"}


async def test_customers_get_null(api, rt, world, clock) -> None:
    ids = await _scene(rt, world, clock)
    # The customer's own ticket, with a due time and a breach: none of it is theirs to see.
    await _set_sla(rt, ids["soon"], clock() + timedelta(minutes=5), clock())
    got = (await api(ONE, {"id": ids["soon"]}, user=world.customer))["data"]["ticket"]
    assert got == {"id": str(ids["soon"]), "slaDueAt": None, "slaBreachedAt": None,
                   "slaState": None}  # fmt: skip
    listed = (await api(LIST, {"t": world.team}, user=world.customer))["data"]["tickets"]
    assert listed["nodes"] and all(n["slaState"] is None for n in listed["nodes"])


@pytest.mark.parametrize(
    ("sla", "want"), [("BREACHED", "breached"), ("DUE_SOON", "soon"), ("RUNNING", "running")]
)
async def test_the_sla_filter(api, rt, world, clock, sla, want) -> None:
    ids = await _scene(rt, world, clock)
    got = (await api(LIST, {"t": world.team, "f": {"sla": sla}}, user=world.staff))["data"]
    assert got["tickets"]["totalCount"] == 1
    assert got["tickets"]["nodes"] == [{"id": str(ids[want]), "slaState": sla}]


async def test_the_filter_is_read_at_the_requests_clock(api, rt, world, clock) -> None:
    ids = await _scene(rt, world, clock)
    clock.advance(3600)
    got = await api(LIST, {"t": world.team, "f": {"sla": "BREACHED"}}, user=world.staff)
    assert {n["id"] for n in got["data"]["tickets"]["nodes"]} == {
        str(ids["soon"]),
        str(ids["breached"]),
    }


async def test_a_customer_is_refused_the_sla_filter(api, rt, world, clock) -> None:
    await _scene(rt, world, clock)
    body = await api(LIST, {"t": world.team, "f": {"sla": "BREACHED"}}, user=world.customer)
    assert body["errors"][0]["extensions"] == {"code": "VALIDATION", "field": "sla"}, body
    # An outsider's answer is an empty list, as for any team not theirs.
    other = await api(LIST, {"t": world.team, "f": {"sla": "BREACHED"}}, user=world.outsider)
    assert other["data"]["tickets"]["nodes"] == []


async def test_an_unknown_sla_value_is_a_graphql_error(api, world) -> None:
    body = await api(LIST, {"t": world.team, "f": {"sla": "LATE"}}, user=world.staff)
    assert body.get("errors"), body
    assert not (body.get("data") or {}).get("tickets")


CLOCKS = (
    "query($id: ID!) { ticket(id: $id) { slaClocks { target state startedAt dueAt warnAt "
    "remainingSeconds } } }"
)
SET_POLICY = (
    "mutation($t: ID!, $i: SlaPolicyInput!) { r: setSlaPolicy(teamId: $t, input: $i) { "
    "__typename } }"
)
ALL_WEEK = [
    {"day": d, "spans": ["00:00-24:00"]} for d in ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
]


async def test_sla_clocks(api, rt, world, clock) -> None:
    printer = world.tickets["printer"]  # URGENT, customer2's
    got = (await api(CLOCKS, {"id": printer}, user=world.staff))["data"]["ticket"]
    assert got["slaClocks"] == []  # no policy yet
    policy = {
        "zone": "UTC", "hours": ALL_WEEK, "warnShare": 0.5,
        "targets": [{"target": "FIRST_RESPONSE", "priority": "URGENT", "minutes": 60}],
    }  # fmt: skip
    made = await api(SET_POLICY, {"t": world.team, "i": policy}, user=world.admin)
    assert made["data"]["r"]["__typename"] == "SlaPolicy", made
    async with rt.engine.connect() as conn:
        created = (
            await conn.execute(
                sa.text("SELECT created_at FROM ticket WHERE id = :i"), {"i": printer}
            )
        ).scalar_one()
    got = (await api(CLOCKS, {"id": printer}, user=world.staff))["data"]["ticket"]["slaClocks"]
    assert len(got) == 1 and got[0]["target"] == "FIRST_RESPONSE"
    assert got[0]["state"] == "RUNNING"
    assert datetime.fromisoformat(got[0]["dueAt"]) == created + timedelta(minutes=60)
    assert datetime.fromisoformat(got[0]["warnAt"]) == created + timedelta(minutes=30)
    left = (created + timedelta(minutes=60) - clock()).total_seconds()
    assert got[0]["remainingSeconds"] == pytest.approx(left, abs=1)
    clock.advance(2 * 3600)  # at the request's clock
    late = (await api(CLOCKS, {"id": printer}, user=world.admin))["data"]["ticket"]["slaClocks"]
    assert late[0]["state"] == "BREACHED" and late[0]["remainingSeconds"] < 0
    mine = await api(CLOCKS, {"id": printer}, user=world.customer2)
    assert mine["data"]["ticket"] == {"slaClocks": None}  # customers: null
