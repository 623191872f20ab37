"""A team's SLA policy over GraphQL: set, read back, clear; the role matrix (admins write, staff
read, customers and outsiders told the team does not exist) and odd input as a typed problem
naming the part to fix."""

from __future__ import annotations

from typing import Any

import pytest

POLICY = (
    "query($t: ID!) { r: slaPolicy(teamId: $t) { __typename "
    "... on SlaPolicy { teamId zone hours { day spans } holidays warnShare "
    "targets { target priority minutes } } ... on NoSlaPolicy { teamId } "
    "... on Problem { message } } }"
)
SET = (
    "mutation($t: ID!, $i: SlaPolicyInput!) { r: setSlaPolicy(teamId: $t, input: $i) { "
    "__typename ... on SlaPolicy { zone warnShare targets { target priority minutes } } "
    "... on Problem { message } ... on ValidationProblem { field } } }"
)
CLEAR = (
    "mutation($t: ID!) { r: clearSlaPolicy(teamId: $t) { __typename "
    "... on SlaPolicyCleared { hadPolicy } ... on Problem { message } } }"
)


def policy_input(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "zone": "Europe/Berlin",
        "hours": [{"day": d, "spans": ["09:00-17:00"]} for d in ("MON", "TUE", "WED")],
        "holidays": ["2026-12-25"],
        "targets": [
            {"target": "FIRST_RESPONSE", "priority": "URGENT", "minutes": 60},
            {"target": "RESOLUTION", "priority": "NORMAL", "minutes": 2400},
        ],
        "warnShare": 0.8,
    }
    return base | over


async def test_set_read_back_and_clear(api, world) -> None:
    t = {"t": world.team}
    assert (await api(POLICY, t, user=world.staff))["data"]["r"]["__typename"] == "NoSlaPolicy"
    made = (await api(SET, t | {"i": policy_input()}, user=world.admin))["data"]["r"]
    assert made["__typename"] == "SlaPolicy", made
    assert made["targets"][0] == {"target": "FIRST_RESPONSE", "priority": "URGENT", "minutes": 60}
    read = (await api(POLICY, t, user=world.staff))["data"]["r"]
    assert read["zone"] == "Europe/Berlin" and read["warnShare"] == 0.8
    assert read["hours"][0] == {"day": "MON", "spans": ["09:00-17:00"]}
    assert read["holidays"] == ["2026-12-25"]
    assert [x["minutes"] for x in read["targets"]] == [60, 2400]
    gone = (await api(CLEAR, t, user=world.admin))["data"]["r"]
    assert gone == {"__typename": "SlaPolicyCleared", "hadPolicy": True}
    again = (await api(CLEAR, t, user=world.admin))["data"]["r"]
    assert again["hadPolicy"] is False


@pytest.mark.parametrize(
    ("role", "read", "write"),
    [
        ("admin", "NoSlaPolicy", "SlaPolicy"),
        ("staff", "NoSlaPolicy", "NotAllowed"),
        ("customer", "NotFound", "NotFound"),
        ("outsider", "NotFound", "NotFound"),
    ],
)
async def test_role_matrix(api, world, role, read, write) -> None:
    user = getattr(world, role)
    t = {"t": world.team}
    assert (await api(POLICY, t, user=user))["data"]["r"]["__typename"] == read
    set_ = (await api(SET, t | {"i": policy_input()}, user=user))["data"]["r"]
    assert set_["__typename"] == write
    cleared = (await api(CLEAR, t, user=user))["data"]["r"]["__typename"]
    assert cleared == ("SlaPolicyCleared" if write == "SlaPolicy" else write)


async def test_refusals_answer_like_a_missing_team(api, world) -> None:
    """A customer asking about their team gets what anybody gets for a team that is not there."""
    mine = (await api(POLICY, {"t": world.team}, user=world.customer))["data"]["r"]
    missing = (await api(POLICY, {"t": "987654"}, user=world.customer))["data"]["r"]
    assert mine == missing == {"__typename": "NotFound", "message": "Team not found."}
    set_mine = await api(SET, {"t": world.team, "i": policy_input()}, user=world.outsider)
    set_missing = await api(SET, {"t": "987654", "i": policy_input()}, user=world.outsider)
    assert set_mine == set_missing


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"zone": "Mars/Olympus"}, "zone"),
        ({"hours": [{"day": "MON", "spans": ["9-5"]}]}, "hours"),
        ({"hours": [{"day": "MON", "spans": ["17:00-09:00"]}]}, "hours"),
        ({"hours": [{"day": "MON", "spans": ["09:00-12:00", "11:00-13:00"]}]}, "hours"),
        ({"hours": []}, "hours"),
        ({"holidays": ["25.12.2026"]}, "holidays"),
        ({"targets": []}, "targets"),
        (
            {"targets": [{"target": "FIRST_RESPONSE", "priority": "HIGH", "minutes": 0}]},
            "firstResponse",
        ),
        (
            {"targets": [{"target": "RESOLUTION", "priority": "LOW", "minutes": 10**7}]},
            "resolution",
        ),
        ({"warnShare": 1.5}, "warnShare"),
        ({"warnShare": 0}, "warnShare"),
    ],
)
async def test_odd_input_is_a_validation_problem(api, world, over, field) -> None:
    got = await api(SET, {"t": world.team, "i": policy_input(**over)}, user=world.admin)
    r = got["data"]["r"]
    assert r["__typename"] == "ValidationProblem" and r["field"] == field, r
    assert r["message"]
    nothing = (await api(POLICY, {"t": world.team}, user=world.admin))["data"]["r"]
    assert nothing["__typename"] == "NoSlaPolicy"
