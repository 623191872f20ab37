"""A team's time rules over GraphQL: set (a run starts at once), read back with the latest runs
and the tickets each touched, clear; the role matrix (admins write, staff read, customers and
outsiders told the team does not exist) and odd days as a typed problem naming the rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.helpers import run_task

RULES = (
    "query($t: ID!) { r: timeRules(teamId: $t) { __typename "
    "... on TimeRules { teamId closeResolvedAfter remindPendingAfter resolvePendingAfter "
    "updatedAt runs { taskId status touched { ticketId title act } } } "
    "... on Problem { message } } }"
)
SET = (
    "mutation($t: ID!, $i: TimeRulesInput!) { r: setTimeRules(teamId: $t, input: $i) { "
    "__typename ... on TimeRules { closeResolvedAfter remindPendingAfter resolvePendingAfter "
    "runs { taskId status } } ... on Problem { message } ... on ValidationProblem { field } } }"
)
CLEAR = (
    "mutation($t: ID!) { r: clearTimeRules(teamId: $t) { __typename "
    "... on TimeRules { closeResolvedAfter remindPendingAfter resolvePendingAfter } "
    "... on Problem { message } } }"
)
GOOD = {"closeResolvedAfter": 7, "remindPendingAfter": 3, "resolvePendingAfter": 4}


async def _age(rt: Any, ticket: int, days: int) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET status_since = :at WHERE id = :id"),
            {"at": rt.clock() - timedelta(days=days), "id": ticket},
        )


async def test_set_runs_at_once_and_lists_the_tickets_touched(api, world) -> None:
    t = {"t": world.team}
    empty = (await api(RULES, t, user=world.staff))["data"]["r"]
    assert empty["__typename"] == "TimeRules" and empty["runs"] == []
    assert empty["closeResolvedAfter"] is None and empty["updatedAt"] is None
    await _age(api.rt, world.tickets["resolved"], 8)
    made = (await api(SET, t | {"i": GOOD}, user=world.admin))["data"]["r"]
    assert made["__typename"] == "TimeRules", made
    assert (made["closeResolvedAfter"], made["resolvePendingAfter"]) == (7, 4)
    [run] = made["runs"]
    assert run["status"] == "WAITING"  # queued by the save, not by the scheduler's next pass
    await run_task(api.rt, int(run["taskId"]))
    read = (await api(RULES, t, user=world.staff))["data"]["r"]
    done = next(r for r in read["runs"] if r["taskId"] == run["taskId"])
    assert done["status"] == "COMPLETED"
    assert done["touched"] == [
        {"ticketId": str(world.tickets["resolved"]), "title": done["touched"][0]["title"],
         "act": "CLOSE"}
    ]  # fmt: skip
    assert read["updatedAt"] and read["remindPendingAfter"] == 3


async def test_clear_turns_every_rule_off(api, world) -> None:
    t = {"t": world.team}
    await api(SET, t | {"i": GOOD}, user=world.admin)
    cleared = (await api(CLEAR, t, user=world.admin))["data"]["r"]
    assert cleared == {"__typename": "TimeRules", "closeResolvedAfter": None,
                       "remindPendingAfter": None, "resolvePendingAfter": None}  # fmt: skip
    read = (await api(RULES, t, user=world.admin))["data"]["r"]
    assert read["closeResolvedAfter"] is None and read["updatedAt"]


@pytest.mark.parametrize(
    ("role", "read", "write"),
    [
        ("admin", "TimeRules", "TimeRules"),
        ("staff", "TimeRules", "NotAllowed"),
        ("customer", "NotFound", "NotFound"),
        ("outsider", "NotFound", "NotFound"),
    ],
)
async def test_role_matrix(api, world, role, read, write) -> None:
    user = getattr(world, role)
    t = {"t": world.team}
    assert (await api(RULES, t, user=user))["data"]["r"]["__typename"] == read
    set_ = (await api(SET, t | {"i": GOOD}, user=user))["data"]["r"]
    assert set_["__typename"] == write
    assert (await api(CLEAR, t, user=user))["data"]["r"]["__typename"] == write
    if write != "TimeRules":  # nothing was saved by a refused caller
        rules = (await api(RULES, t, user=world.admin))["data"]["r"]
        assert rules["updatedAt"] is None and rules["runs"] == []


async def test_refusals_answer_like_a_missing_team(api, world) -> None:
    mine = (await api(RULES, {"t": world.team}, user=world.customer))["data"]["r"]
    missing = (await api(RULES, {"t": "987654"}, user=world.customer))["data"]["r"]
    assert mine == missing == {"__typename": "NotFound", "message": "Team not found."}
    set_mine = await api(SET, {"t": world.team, "i": GOOD}, user=world.outsider)
    set_missing = await api(SET, {"t": "987654", "i": GOOD}, user=world.outsider)
    assert set_mine == set_missing


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"closeResolvedAfter": 0}, "closeResolvedAfter"),
        ({"closeResolvedAfter": 3651}, "closeResolvedAfter"),
        ({"remindPendingAfter": -1}, "remindPendingAfter"),
        ({"resolvePendingAfter": 4}, "resolvePendingAfter"),  # no reminder first
        ({"remindPendingAfter": 3, "resolvePendingAfter": 0}, "resolvePendingAfter"),
    ],
)
async def test_odd_days_are_a_validation_problem(api, world, given, field) -> None:
    got = (await api(SET, {"t": world.team, "i": given}, user=world.admin))["data"]["r"]
    assert got["__typename"] == "ValidationProblem" and got["field"] == field, got
    assert got["message"]
    rules = (await api(RULES, {"t": world.team}, user=world.admin))["data"]["r"]
    assert rules["updatedAt"] is None
