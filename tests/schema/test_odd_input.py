"""No 500s from odd characters (issue 12, point 5): NUL bytes, lone surrogates, `²` and
5,000-digit numbers in every GraphQL argument answer a typed problem naming the field, or an
ordinary "not found"/validation answer — never INTERNAL_SERVER_ERROR, never SQL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from desk.imports import service as imports
from desk.work import tasks
from tests.schema.conftest import Api

ODD = {
    "nul": "bad\x00value",
    "surrogate": "bad\ud800value",
    "superscript": "²",
    "huge": "9" * 5000,
    "control": "bell\x07",
}

# (operation with one $v, the variable's name as a ValidationProblem would name it or None when
# the argument is an id, where a bad value is simply "not found")
OPERATIONS: dict[str, tuple[str, str | None]] = {
    "createTicket.title": (
        "mutation($t: ID!, $v: String!) { r: createTicket(teamId: $t, title: $v) "
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "title",
    ),
    "createTicket.body": (
        'mutation($t: ID!, $v: String!) { r: createTicket(teamId: $t, title: "ok", body: $v) '
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "body",
    ),
    "createTicket.priority": (  # an enum: the error quotes the value back
        'mutation($t: ID!, $v: Priority!) { r: createTicket(teamId: $t, title: "ok", '
        "priority: $v) { __typename } }",
        None,
    ),
    "tasks.kind": (
        "query($t: ID!, $v: TaskKind!) { r: tasks(teamId: $t, kind: $v) { nodes { id } } }",
        None,
    ),
    "updateTicket.title": (
        "mutation($k: ID!, $v: String!) { r: updateTicket(id: $k, title: $v) "
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "title",
    ),
    "scheduleReminder.note": (
        "mutation($k: ID!, $v: String!) { r: scheduleReminder(ticketId: $k, inMinutes: 5, note: $v)"
        " { __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "note",
    ),
    "createApiToken.name": (
        "mutation($v: String!) { r: createApiToken(name: $v) "
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "name",
    ),
    "createExport.q": (
        "mutation($t: ID!, $v: String!) { r: createExport(teamId: $t, filter: {q: $v}) "
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "q",
    ),
    "createExport.assigneeId": (
        "mutation($t: ID!, $v: ID!) { r: createExport(teamId: $t, "
        "filter: {assignment: USER, assigneeId: $v}) "
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "assigneeId",
    ),
    "tickets.q": (
        "query($t: ID!, $v: String!) { r: tickets(teamId: $t, filter: {q: $v}) { totalCount } }",
        "q",
    ),
    "tickets.after": (
        "query($t: ID!, $v: String!) { r: tickets(teamId: $t, after: $v) { totalCount } }",
        "after",
    ),
    "tasks.after": (
        "query($t: ID!, $v: String!) { r: tasks(teamId: $t, after: $v) { nodes { id } } }",
        "after",
    ),
    "notifications.after": (
        "query($v: String!) { r: notifications(after: $v) { nodes { id } } }",
        "after",
    ),
    "tasks.newerThan": (
        "query($t: ID!, $v: ID!) { r: tasks(teamId: $t, newerThan: $v) { nodes { id } } }",
        "newerThan",
    ),
    "ticket.id": ("query($v: ID!) { r: ticket(id: $v) { id } }", None),
    "task.id": ("query($v: ID!) { r: task(id: $v) { id } }", None),
    "team.id": ("query($v: ID!) { r: team(id: $v) { id } }", None),
    "tickets.teamId": ("query($v: ID!) { r: tickets(teamId: $v) { totalCount } }", None),
    "cancelTask.id": (
        "mutation($v: ID!) { r: cancelTask(id: $v) { __typename } }",
        None,
    ),
    "retryTask.id": ("mutation($v: ID!) { r: retryTask(id: $v) { __typename } }", None),
    "cancelReminder.ticketId": (
        "mutation($v: ID!) { r: cancelReminder(ticketId: $v) { __typename } }",
        None,
    ),
    "revokeApiToken.id": ("mutation($v: ID!) { r: revokeApiToken(id: $v) { __typename } }", None),
    "markNotificationsRead.ids": (
        "mutation($v: ID!) { r: markNotificationsRead(ids: [$v]) { __typename } }",
        None,
    ),
    "scheduleExport.time": (
        "mutation($t: ID!, $v: String!) { r: scheduleExport(teamId: $t, days: [1], time: $v) "
        "{ __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "time",
    ),
    "scheduleExport.timezone": (
        'mutation($t: ID!, $v: String!) { r: scheduleExport(teamId: $t, days: [1], time: "08:00", '
        "timezone: $v) { __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "timezone",
    ),
    "scheduleExport.name": (
        'mutation($t: ID!, $v: String!) { r: scheduleExport(teamId: $t, days: [1], time: "08:00", '
        "name: $v) { __typename ... on Problem { message } ... on ValidationProblem { field } } }",
        "name",
    ),
    "scheduleExport.q": (
        'mutation($t: ID!, $v: String!) { r: scheduleExport(teamId: $t, days: [1], time: "08:00", '
        "filter: {q: $v}) { __typename ... on Problem { message } ... on ValidationProblem "
        "{ field } } }",
        "q",
    ),
    "schedules.teamId": ("query($v: ID!) { r: schedules(teamId: $v) { id } }", None),
    "pauseSchedule.id": ("mutation($v: ID!) { r: pauseSchedule(id: $v) { __typename } }", None),
    "resumeSchedule.id": ("mutation($v: ID!) { r: resumeSchedule(id: $v) { __typename } }", None),
    "deleteSchedule.id": ("mutation($v: ID!) { r: deleteSchedule(id: $v) { __typename } }", None),
    "startImport.uploadId": (
        "mutation($t: ID!, $v: ID!) { r: startImport(teamId: $t, mode: CREATE, uploadId: $v) "
        "{ __typename } }",
        None,
    ),
}


async def _post(api: Api, query: str, variables: dict[str, Any], user: int) -> Any:
    # ensure_ascii: a lone surrogate travels as the JSON escape \ud800, as a client would send it
    body = json.dumps({"query": query, "variables": variables}).encode()
    headers = api.headers(user) | {"Content-Type": "application/json"}
    return await api.client.post("/graphql", content=body, headers=headers)


def _check(response: Any, field: str | None) -> None:
    assert response.status_code == 200, response.text[:300]
    text = response.text
    for leak in ("SELECT", "INSERT", "psycopg", "sqlalchemy", "%(", "[SQL"):
        assert leak not in text, text[:500]
    body = response.json()
    for error in body.get("errors") or []:
        assert error["extensions"]["code"] != "INTERNAL_SERVER_ERROR", error
        if field is not None and error["extensions"]["code"] == "VALIDATION":
            assert error["extensions"]["field"] == field, error
    result = (body.get("data") or {}).get("r")
    if isinstance(result, dict) and result.get("__typename") == "ValidationProblem":
        assert result["field"] == field, result


@pytest.mark.parametrize("value", list(ODD.values()), ids=list(ODD))
@pytest.mark.parametrize("name", list(OPERATIONS))
async def test_odd_values_in_every_argument_never_give_a_500(api, world, name, value) -> None:
    query, field = OPERATIONS[name]
    variables = {"t": world.team, "k": world.tickets["login"], "v": value}
    variables = {k: v for k, v in variables.items() if f"${k}" in query}
    _check(await _post(api, query, variables, world.admin), field)


@pytest.mark.parametrize("value", [ODD["nul"], ODD["surrogate"], ODD["control"]])
async def test_bad_characters_in_text_are_a_validation_problem_naming_the_field(
    api, world, value
) -> None:
    for name in ("createTicket.title", "createTicket.body", "scheduleReminder.note"):
        query, field = OPERATIONS[name]
        variables = {"t": world.team, "k": world.tickets["login"], "v": value}
        variables = {k: v for k, v in variables.items() if f"${k}" in query}
        result = (await _post(api, query, variables, world.admin)).json()["data"]["r"]
        assert result["__typename"] == "ValidationProblem", (name, result)
        assert result["field"] == field
    for name in ("tickets.q", "tickets.after"):
        query, field = OPERATIONS[name]
        body = (await _post(api, query, {"t": world.team, "v": value}, world.admin)).json()
        assert body["errors"][0]["extensions"] == {"code": "VALIDATION", "field": field}, body


async def test_huge_numbers_in_the_query_text_are_input_errors(api, world) -> None:
    for query in (
        f"{{ tickets(teamId: {world.team}, first: {'9' * 5000}) {{ totalCount }} }}",
        f"{{ ticket(id: {'9' * 5000}) {{ id }} }}",
        '{ ticket(id: "\\u0000") { id } }',
        f'{{ tickets(teamId: {world.team}, filter: {{q: "a\\u0000"}}) {{ totalCount }} }}',
    ):
        response = await api.client.post(
            "/graphql", json={"query": query}, headers=api.headers(world.admin)
        )
        _check(response, "q")


async def test_a_retry_conflict_never_hands_over_a_task_the_caller_cannot_see(
    api, rt, world
) -> None:
    """A demoted admin retries their failed import while another admin's import runs: the
    answer must not be that other import, which `task(id)` hides from them."""
    csv = b"external_id,title\nA-1,One\n"
    mine = await imports.submit_import(rt, world.admin, world.team, "a.csv", csv, "create")
    async with rt.engine.begin() as conn:  # as the worker leaves a task out of attempts
        await conn.exec_driver_sql(
            "UPDATE background_task SET status = 'FAILED', finished_at = now() WHERE id = %s",
            (mine.id,),
        )
        # a second admin starts theirs; then the first is demoted to staff
        await conn.exec_driver_sql(
            "UPDATE membership SET role = 'ADMIN' WHERE user_id = %s AND team_id = %s",
            (world.staff, world.team),
        )
    theirs = await imports.submit_import(rt, world.staff, world.team, "b.csv", csv, "create")
    async with rt.engine.begin() as conn:
        await conn.exec_driver_sql(
            "UPDATE membership SET role = 'STAFF' WHERE user_id = %s AND team_id = %s",
            (world.admin, world.team),
        )
    hidden = await api("query($k: ID!) { task(id: $k) { id } }", {"k": theirs.id}, user=world.admin)
    assert hidden["data"]["task"] is None
    body = await api(
        "mutation($k: ID!) { retryTask(id: $k) { __typename ... on TaskConflict "
        "{ existingTask { id } } ... on Problem { message } } }",
        {"k": mine.id},
        user=world.admin,
    )
    result = body["data"]["retryTask"]
    assert result["__typename"] != "TaskConflict", result
    assert str(theirs.id) not in json.dumps(body)
    assert (await tasks.get_task(rt, world.admin, mine.id)).status == "FAILED"


def test_database_errors_are_masked_in_dev_too() -> None:
    """A driver error's text quotes the statement and its parameters (a new token's hash, say):
    development shows other unexpected errors as they are, never these."""
    from graphql import GraphQLError
    from sqlalchemy import exc as saexc

    from schema.errors import shown

    driver = saexc.DataError(
        "INSERT INTO api_token (token_sha256) VALUES (%(h)s)", {"h": "0123abcd"}, ValueError("x")
    )
    error = GraphQLError(str(driver), original_error=driver, path=["r"])
    dev = shown(error, "rid123", prod=False).formatted
    assert "INSERT" not in str(dev) and "0123abcd" not in str(dev)
    assert dev["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
    assert "rid123" in dev["message"]
    plain = GraphQLError("boom", original_error=KeyError("k"), path=["r"])
    assert shown(plain, "rid", prod=False).message == "boom"  # dev keeps other messages
