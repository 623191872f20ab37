"""A team's SLA policy and time rules over REST: replace, read back, drop; a run started by
saving rules and listed with the tickets it touched; staff read but may not write (403), and a
customer or outsider is answered exactly as for a missing team; bad values a 422 naming the
field, with nothing written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.api.tokens import bearer
from tests.helpers import run_task

POLICY: dict[str, Any] = {
    "zone": "Europe/Berlin",
    "hours": {d: ["09:00-12:00", "13:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")},
    "holidays": ["2026-12-25"],
    "targets": {"first_response": {"URGENT": 60, "NORMAL": 480}, "resolution": {"URGENT": 480}},
    "warn_share": 0.8,
}
RULES = {"close_resolved_after": 7, "remind_pending_after": 3, "resolve_pending_after": 4}


def _sla(team: int | str) -> str:
    return f"/api/v1/teams/{team}/sla-policy"


def _rules(team: int | str) -> str:
    return f"/api/v1/teams/{team}/time-rules"


async def test_sla_policy_put_get_delete(client, world):
    zhou, chen = await bearer(client, world.admin), await bearer(client, world.staff)
    none = await client.get(_sla(world.team), headers=chen)
    assert none.status_code == 200 and none.json() == {"team_id": world.team, "policy": None}
    put = await client.put(_sla(world.team), headers=zhou, json=POLICY)
    assert put.status_code == 200, put.text
    read = (await client.get(_sla(world.team), headers=chen)).json()["policy"]
    assert read["zone"] == "Europe/Berlin" and read["warn_share"] == 0.8
    assert read["hours"]["mon"] == ["09:00-12:00", "13:00-17:00"] and "sat" not in read["hours"]
    assert read["targets"] == {"first_response": {"NORMAL": 480, "URGENT": 60},
                               "resolution": {"URGENT": 480}}  # fmt: skip
    assert read["holidays"] == ["2026-12-25"]
    gone = await client.delete(_sla(world.team), headers=zhou)
    assert gone.json() == {"team_id": world.team, "had_policy": True}
    again = await client.delete(_sla(world.team), headers=zhou)
    assert again.json()["had_policy"] is False


async def test_time_rules_put_run_and_touched(client, world):
    zhou, chen = await bearer(client, world.admin), await bearer(client, world.staff)
    ticket = world.tickets["resolved"]
    async with client.rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET status_since = :at WHERE id = :id"),
            {"at": client.rt.clock() - timedelta(days=8), "id": ticket},
        )
    put = await client.put(_rules(world.team), headers=zhou, json=RULES)
    assert put.status_code == 200, put.text
    body = put.json()
    assert (body["close_resolved_after"], body["resolve_pending_after"]) == (7, 4)
    [run] = body["runs"]
    assert run["status"] == "WAITING" and run["touched"] == []
    await run_task(client.rt, run["task_id"])
    read = (await client.get(_rules(world.team), headers=chen)).json()
    done = next(r for r in read["runs"] if r["task_id"] == run["task_id"])
    assert done["status"] == "COMPLETED"
    assert [(t["ticket_id"], t["rule"]) for t in done["touched"]] == [(ticket, "close")]
    off = await client.delete(_rules(world.team), headers=zhou)
    assert off.status_code == 200 and off.json()["close_resolved_after"] is None


async def test_staff_read_but_may_not_write(client, world):
    chen = await bearer(client, world.staff)
    for url, body in ((_sla(world.team), POLICY), (_rules(world.team), RULES)):
        assert (await client.get(url, headers=chen)).status_code == 200
        for answer in (
            await client.put(url, headers=chen, json=body),
            await client.delete(url, headers=chen),
        ):
            assert answer.status_code == 403, answer.text
            assert answer.json()["error"]["code"] == "FORBIDDEN"
    rules = (await client.get(_rules(world.team), headers=chen)).json()
    assert rules["updated_at"] is None and rules["runs"] == []


async def test_customers_and_outsiders_get_the_missing_team_answer(client, world):
    for user in (world.customer, world.outsider):
        headers = await bearer(client, user)
        for url, body in ((_sla, POLICY), (_rules, RULES)):
            for method in ("GET", "PUT", "DELETE"):
                json = body if method == "PUT" else None
                mine = await client.request(method, url(world.team), headers=headers, json=json)
                missing = await client.request(method, url(987654), headers=headers, json=json)
                assert mine.status_code == missing.status_code == 404, mine.text
                assert mine.json() == missing.json()
    assert (await client.get(_sla(world.team))).status_code == 401
    assert (await client.get(_rules(world.team))).status_code == 401


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"zone": "Mars/Olympus"}, "zone"),
        ({"hours": {"mon": ["9-5"]}}, "hours"),
        ({"hours": {"mon": ["17:00-09:00"]}}, "hours"),
        ({"hours": {"mon": ["09:00-12:00", "11:00-13:00"]}}, "hours"),
        ({"hours": {}}, "hours"),
        ({"holidays": ["2026-02-30"]}, "holidays"),
        ({"targets": {}}, "targets"),
        ({"targets": {"first_response": {"HIGH": 0}}}, "targets"),
        ({"warn_share": 1.5}, "warn_share"),
        ({"extra": 1}, "extra"),
    ],
)
async def test_bad_policy_is_a_422_naming_the_field(client, world, over, field):
    zhou = await bearer(client, world.admin)
    got = await client.put(_sla(world.team), headers=zhou, json=POLICY | over)
    assert got.status_code == 422, got.text
    error = got.json()["error"]
    assert error["code"] == "VALIDATION" and error["field"] == field, error
    assert (await client.get(_sla(world.team), headers=zhou)).json()["policy"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"close_resolved_after": 0}, "close_resolved_after"),
        ({"remind_pending_after": 3651}, "remind_pending_after"),
        ({"close_resolved_after": "7"}, "close_resolved_after"),
        ({"resolve_pending_after": 4}, "resolve_pending_after"),
    ],
)
async def test_bad_rules_are_a_422_naming_the_field(client, world, body, field):
    zhou = await bearer(client, world.admin)
    got = await client.put(_rules(world.team), headers=zhou, json=body)
    assert got.status_code == 422, got.text
    assert got.json()["error"]["field"] == field
    assert (await client.get(_rules(world.team), headers=zhou)).json()["updated_at"] is None
