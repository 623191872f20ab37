"""Expected failures come back as typed union members (or coded errors), never as a 500."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.schema.scene import fail_task

EXPORT = """mutation($t: ID!, $f: TicketFilterInput) {
  createExport(teamId: $t, filter: $f) {
    __typename
    ... on Task { id status statusLabel }
    ... on TaskConflict { message existingTask { id status } }
    ... on QuotaExceeded { message retryAfter }
    ... on ValidationProblem { field message }
    ... on NotFound { message }
  }
}"""

REMIND = """mutation($id: ID!, $at: DateTime, $in: Int, $note: String! = "") {
  scheduleReminder(ticketId: $id, at: $at, inMinutes: $in, note: $note) {
    __typename
    ... on Task { id statusLabel runAt }
    ... on TaskConflict { existingTask { id } }
    ... on Problem { message }
    ... on ValidationProblem { field }
  }
}"""


async def test_double_create_export_returns_the_first_task(api, world) -> None:
    filters = {"status": ["OPEN"], "q": "printer"}
    first = await api(EXPORT, {"t": world.team, "f": filters}, user=world.staff)
    task = first["data"]["createExport"]
    assert task["__typename"] == "Task" and task["statusLabel"] == "Queued"
    # the same filters written differently normalise to the same scope
    again = await api(
        EXPORT, {"t": world.team, "f": {"q": " printer ", "status": ["OPEN"]}}, user=world.staff
    )
    conflict = again["data"]["createExport"]
    assert conflict["__typename"] == "TaskConflict"
    assert conflict["existingTask"]["id"] == task["id"]


async def test_concurrent_double_click_creates_one_task(api, world) -> None:
    bodies = await asyncio.gather(
        *[api(EXPORT, {"t": world.team}, user=world.customer) for _ in range(4)]
    )
    results = [b["data"]["createExport"] for b in bodies]
    created = [r for r in results if r["__typename"] == "Task"]
    assert len(created) == 1
    assert {r["existingTask"]["id"] for r in results if r["__typename"] == "TaskConflict"} == {
        created[0]["id"]
    }


async def test_quota_exceeded_says_when_to_try_again(make_api, world) -> None:
    async with make_api(export_max_active_per_user=1) as api:
        ok = await api(EXPORT, {"t": world.team, "f": {"q": "a"}}, user=world.staff)
        assert ok["data"]["createExport"]["__typename"] == "Task"
        body = await api(EXPORT, {"t": world.team, "f": {"q": "b"}}, user=world.staff)
    quota = body["data"]["createExport"]
    assert quota["__typename"] == "QuotaExceeded"
    assert quota["retryAfter"] and "export" in quota["message"]


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"q": "x" * 201}, "q"),
        ({"assignment": "USER"}, "assigneeId"),
        ({"assignment": "ME", "assigneeId": "3"}, "assigneeId"),
        ({"assignment": "USER", "assigneeId": "abc"}, "assigneeId"),
    ],
)
async def test_bad_filters_are_validation_problems(api, world, filters, field) -> None:
    body = await api(EXPORT, {"t": world.team, "f": filters}, user=world.staff)
    problem = body["data"]["createExport"]
    assert problem["__typename"] == "ValidationProblem", body
    assert problem["field"] == field and problem["message"]


@pytest.mark.parametrize("team", ["999999", "abc", "-1", "99999999999999999999", "0"])
async def test_unknown_team_is_not_found(api, world, team) -> None:
    body = await api(EXPORT, {"t": team}, user=world.staff)
    assert body["data"]["createExport"]["__typename"] == "NotFound"


@pytest.mark.parametrize(
    ("variables", "field"),
    [
        ({"in": 10, "at": "2030-01-01T09:00:00+00:00"}, "at"),  # both
        ({}, "at"),  # neither
        ({"at": "2030-01-01T09:00:00"}, "at"),  # no time zone
        ({"at": "2001-01-01T09:00:00+00:00"}, "at"),  # in the past
        ({"in": 0}, "inMinutes"),
        ({"in": 10, "note": "n" * 501}, "note"),
    ],
)
async def test_reminder_validation(api, world, variables, field) -> None:
    body = await api(REMIND, {"id": world.tickets["login"], **variables}, user=world.staff)
    problem = body["data"]["scheduleReminder"]
    assert problem["__typename"] == "ValidationProblem", body
    assert problem["field"] == field


async def test_reminder_on_a_resolved_ticket_is_refused(api, world) -> None:
    body = await api(REMIND, {"id": world.tickets["resolved"], "in": 5}, user=world.staff)
    assert body["data"]["scheduleReminder"]["__typename"] == "ValidationProblem"


async def test_reminder_same_minute_conflicts_other_time_reschedules(api, world, clock) -> None:
    at = (clock.now + timedelta(hours=2)).replace(second=0, microsecond=0)
    first = await api(
        REMIND, {"id": world.tickets["login"], "at": at.isoformat()}, user=world.staff
    )
    task = first["data"]["scheduleReminder"]
    assert task["statusLabel"] == "Scheduled"
    same = await api(
        REMIND,
        {"id": world.tickets["login"], "at": (at + timedelta(seconds=30)).isoformat()},
        user=world.admin,
    )
    assert same["data"]["scheduleReminder"]["existingTask"]["id"] == task["id"]
    later = await api(REMIND, {"id": world.tickets["login"], "in": 300}, user=world.admin)
    assert later["data"]["scheduleReminder"]["__typename"] == "Task"
    old = await api(
        "query($id: ID!) { task(id: $id) { statusLabel resultSummary } }",
        {"id": task["id"]},
        user=world.staff,
    )
    assert old["data"]["task"]["statusLabel"] == "Skipped"
    assert "Superseded" in old["data"]["task"]["resultSummary"]


async def test_retry_of_a_task_that_did_not_fail(api, rt, world) -> None:
    created = await api(EXPORT, {"t": world.team}, user=world.staff)
    task_id = created["data"]["createExport"]["id"]
    retry = "mutation($id: ID!) { retryTask(id: $id) { __typename ... on ValidationProblem { field message } ... on Task { status canRetry } } }"
    body = await api(retry, {"id": task_id}, user=world.staff)
    assert body["data"]["retryTask"]["__typename"] == "ValidationProblem"
    await fail_task(rt, int(task_id))
    body = await api(retry, {"id": task_id}, user=world.staff)
    assert body["data"]["retryTask"] == {
        "__typename": "Task",
        "status": "WAITING",
        "canRetry": False,
    }


@pytest.mark.parametrize(
    ("mutation", "typename"),
    [
        ('updateTicket(id: "abc", status: OPEN)', "NotFound"),
        ('updateTicket(id: "99999999999", status: OPEN)', "NotFound"),
        ('cancelTask(id: "12345")', "NotFound"),
        ('retryTask(id: "x")', "NotFound"),
        ('revokeApiToken(id: "7")', "NotFound"),
        ('cancelReminder(ticketId: "0")', "NotFound"),
        ('createTicket(teamId: "1", title: "   ")', "ValidationProblem"),
        ('createApiToken(name: "")', "ValidationProblem"),
        ("markNotificationsRead", "ValidationProblem"),  # neither ids nor all
        ('markNotificationsRead(ids: ["1"], all: true)', "ValidationProblem"),
    ],
)
async def test_mutation_problems(api, world, mutation, typename) -> None:
    body = await api(f"mutation {{ {mutation} {{ __typename }} }}", user=world.staff)
    assert "errors" not in body, body
    (result,) = body["data"].values()
    assert result["__typename"] == typename


async def test_update_ticket_assignee_rules(api, world) -> None:
    update = "mutation($id: ID!, $a: ID) { updateTicket(id: $id, assigneeId: $a) { __typename ... on Ticket { assignee { id } } ... on ValidationProblem { field } } }"
    ticket = world.tickets["printer"]
    body = await api(update, {"id": ticket, "a": world.customer}, user=world.staff)
    assert body["data"]["updateTicket"] == {"__typename": "ValidationProblem", "field": "assignee"}
    body = await api(update, {"id": ticket, "a": world.staff}, user=world.staff)
    assert body["data"]["updateTicket"]["assignee"] == {"id": str(world.staff)}
    body = await api(update, {"id": ticket, "a": None}, user=world.staff)  # explicit null: unassign
    assert body["data"]["updateTicket"]["assignee"] is None


@pytest.mark.parametrize(
    ("args", "field"),
    [("first: 0", "first"), ("first: 500", "first"), ('after: "not-a-cursor"', "after")],
)
async def test_bad_list_arguments_are_coded_errors(api, world, args, field) -> None:
    body = await api(
        f"query($t: ID!) {{ tickets(teamId: $t, {args}) {{ totalCount }} }}",
        {"t": world.team},
        user=world.staff,
    )
    (error,) = body["errors"]
    assert error["extensions"] == {"code": "VALIDATION", "field": field}


async def test_mutation_rate_limit(make_api, world, clock) -> None:
    mark = "mutation { markNotificationsRead(all: true) { __typename } }"
    async with make_api(mutation_rate_per_minute=3) as api:
        clock.now = clock.now.replace(second=1)  # well inside one fixed window
        for _ in range(3):
            body = await api(mark, user=world.staff)
            assert body["data"]["markNotificationsRead"]["__typename"] == "NotificationsMarked"
        refused = await api(mark, user=world.staff)
        assert refused["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert "minute" in refused["errors"][0]["message"]
        # another user has their own budget; queries are never limited
        assert "errors" not in await api(mark, user=world.admin)
        assert "errors" not in await api("{ me { id } }", user=world.staff)
        clock.advance(60)  # the next window
        assert "errors" not in await api(mark, user=world.staff)
