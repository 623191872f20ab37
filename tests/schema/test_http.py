"""The /graphql endpoint as HTTP: JSON POST only (CSRF-safe with cookies), request-level
refusals in the GraphQL error shape, credentials, GraphiQL outside production, and limits on
what a document may ask — all answered with clear errors, never a 500."""

from __future__ import annotations

import json
import logging

import pytest

from desk.console import health
from desk.people import users

ME = "{ me { id } }"


async def test_json_post_with_cookie_or_token(api, rt, world) -> None:
    assert (await api(ME, user=world.customer))["data"]["me"]["id"] == str(world.customer)
    _, token = await users.create_token(rt, world.admin, "t")
    assert (await api(ME, token=token))["data"]["me"]["id"] == str(world.admin)


async def test_token_use_is_recorded_and_revocation_is_immediate(api, rt, world, clock) -> None:
    row, token = await users.create_token(rt, world.staff, "t")
    await api(ME, token=token)
    listed = await api("{ apiTokens { id lastUsedAt active } }", user=world.staff)
    assert listed["data"]["apiTokens"][0]["lastUsedAt"] is not None
    revoke = (
        "mutation($id: ID!) { revokeApiToken(id: $id) { ... on ApiToken { active revokedAt } } }"
    )
    body = await api(revoke, {"id": row.id}, token=token)
    assert body["data"]["revokeApiToken"]["active"] is False
    refused = await api(ME, token=token)
    assert refused["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    "header",
    ["Bearer tdk_nope_nope", "Bearer ", "Bearer not-even-a-taskdesk-token"],
)
async def test_bad_bearer_token_is_unauthenticated(api, world, header) -> None:
    r = await api.client.post("/graphql", json={"query": ME}, headers={"Authorization": header})
    assert r.status_code == 200
    assert r.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


async def test_tampered_cookie_is_anonymous(api, world) -> None:
    headers = api.headers(user=world.admin)
    headers["Cookie"] = headers["Cookie"][:-3] + "xyz"
    r = await api.client.post("/graphql", json={"query": ME}, headers=headers)
    assert r.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", "query=%7B+me+%7B+id+%7D+%7D"),
        ("text/plain", json.dumps({"query": ME})),  # a "simple" cross-site request
        (
            "multipart/form-data; boundary=x",
            '--x\r\nContent-Disposition: form-data; name="query"\r\n\r\n{ me { id } }\r\n--x--\r\n',
        ),
        ("application/graphql", ME),
    ],
)
async def test_only_json_posts_run(api, world, content_type, body) -> None:
    headers = {**api.headers(user=world.admin), "Content-Type": content_type}
    r = await api.client.post("/graphql", content=body, headers=headers)
    assert r.status_code == 415
    assert r.json()["errors"][0]["extensions"]["code"] == "UNSUPPORTED_MEDIA_TYPE"


async def test_no_queries_over_get(api, world) -> None:
    r = await api.client.get(
        "/graphql", params={"query": ME}, headers=api.headers(user=world.admin)
    )
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    assert "data" not in r.json()


@pytest.mark.parametrize(
    "body",
    [
        "{not json",
        "[]",
        json.dumps([{"query": ME}, {"query": ME}]),  # batching
        json.dumps({"query": ""}),
        json.dumps({"query": 5}),
        json.dumps({"query": ME, "variables": [1]}),
        json.dumps({"query": ME, "operationName": 3}),
        json.dumps({"query": "query A { me { id } }", "operationName": "B"}),
        "[" * 50_000,
    ],
)
async def test_malformed_requests_are_400(api, world, body) -> None:
    headers = {**api.headers(user=world.admin), "Content-Type": "application/json"}
    r = await api.client.post("/graphql", content=body, headers=headers)
    assert r.status_code == 400, r.text
    assert r.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


async def test_oversized_body_is_413(api, world) -> None:
    query = "{ me { id } }" + " " * 70_000
    r = await api.post(query, user=world.admin)
    assert r.status_code == 413


async def test_every_answer_has_a_request_id(api, world) -> None:
    r = await api.post(ME, user=world.admin)
    assert len(r.headers["x-request-id"]) == 12
    assert r.headers["cache-control"] == "no-store"


async def test_graphiql_in_dev_not_in_prod(api, make_api) -> None:
    r = await api.client.get("/graphql", headers={"Accept": "text/html"})
    assert r.status_code == 200 and "taskdesk GraphiQL" in r.text
    assert "createApiToken" in r.text  # the welcome text says how to get a token
    async with make_api(taskdesk_env="prod", secret_key="x" * 32) as prod:
        r = await prod.client.get("/graphql", headers={"Accept": "text/html"})
        assert r.status_code == 405


INTROSPECT = "{ __schema { types { name } } }"


async def test_introspection_and_suggestions_in_dev(api, world) -> None:
    assert (await api(INTROSPECT, user=world.staff))["data"]["__schema"]["types"]
    typo = await api("{ taks(id: 1) { id } }", user=world.staff)
    assert "Did you mean" in typo["errors"][0]["message"]


async def test_no_introspection_and_no_suggestions_in_prod(make_api, world) -> None:
    async with make_api(taskdesk_env="prod", secret_key="x" * 32) as api:
        body = await api(INTROSPECT, user=world.staff)
        assert body["data"] is None
        assert "introspection" in body["errors"][0]["message"].lower()
        for typo in [
            "{ taks(id: 1) { id } }",
            "{ task(idd: 1) { id } }",
            "{ task(id: 1) { stats } }",
        ]:
            message = (await api(typo, user=world.staff))["errors"][0]["message"]
            assert "Did you mean" not in message, message


async def test_unexpected_errors_are_masked_in_prod_and_logged(
    make_api, world, monkeypatch, caplog
) -> None:
    async def broken(rt: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(health, "check", broken)
    caplog.set_level(logging.ERROR, logger="taskdesk.graphql")
    async with make_api(taskdesk_env="prod", secret_key="x" * 32) as api:
        r = await api.post("{ health { ok } }", user=world.staff)
    assert r.status_code == 200
    (error,) = r.json()["errors"]
    rid = r.headers["x-request-id"]
    assert "secret" not in json.dumps(r.json())
    assert error["extensions"] == {"code": "INTERNAL_SERVER_ERROR", "requestId": rid}
    assert rid in error["message"]
    logged = [rec for rec in caplog.records if rid in rec.getMessage()]
    assert logged and logged[0].exc_info and "secret internals" in str(logged[0].exc_info[1])


async def test_unexpected_errors_in_dev_keep_their_message(api, world, monkeypatch) -> None:
    async def broken(rt: object) -> None:
        raise RuntimeError("visible in dev")

    monkeypatch.setattr(health, "check", broken)
    body = await api("{ health { ok } }", user=world.staff)
    assert body["errors"][0]["message"] == "visible in dev"
    assert body["errors"][0]["extensions"]["code"] == "INTERNAL_SERVER_ERROR"


# --- limits ----------------------------------------------------------------------------------


def _deep(levels: int) -> str:
    inner = "id"
    for _ in range(levels):
        inner = f"pendingReminder {{ ticket {{ {inner} }} }}"
    return f"query($id: ID!) {{ ticket(id: $id) {{ {inner} }} }}"


async def test_a_reasonable_nested_query_passes(api, world) -> None:
    body = await api(_deep(3), {"id": world.tickets["login"]}, user=world.staff)
    assert "errors" not in body


async def test_deep_query_is_refused(api, world) -> None:
    body = await api(_deep(8), {"id": world.tickets["login"]}, user=world.staff)
    assert body["data"] is None
    (error,) = body["errors"]
    assert "exceeds maximum operation depth of 10" in error["message"]
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"


async def test_alias_bomb_is_refused(api, world) -> None:
    fields = " ".join(f"a{i}: me {{ id }}" for i in range(200))
    body = await api(f"{{ {fields} }}", user=world.staff)
    assert body["data"] is None
    assert "aliases found. Allowed: 30" in body["errors"][0]["message"]


async def test_huge_query_is_refused(api, world) -> None:
    fields = " ".join("id" for _ in range(3000))
    body = await api(f"{{ me {{ {fields} }} }}", user=world.staff)
    assert body["data"] is None
    (error,) = body["errors"]
    assert "more than 2000 tokens" in error["message"]
    assert error["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        ("fragment A on Query { ...B } fragment B on Query { ...A } { ...A }", None),
        ("{ me { id } ", None),  # syntax error
        ("query($id: ID!) { task(id: $id) { id } }", {"id": {"nested": [1, 2]}}),
        ("query($id: ID!) { task(id: $id) { id } }", {}),
        ("query($n: Int) { notifications(first: $n) { pageInfo { hasNextPage } } }", {"n": 2**40}),
        ('mutation { scheduleReminder(ticketId: 1, at: "not a date") { __typename } }', None),
        ("subscription { me { id } }", None),
        ("{ task(id: 1) }", None),  # object without selection
        ("{ __typename }", None),
        ("query A { me { id } } query B { me { id } }", None),  # which one?
    ],
)
async def test_odd_documents_never_500(api, world, query, variables) -> None:
    r = await api.post(query, variables, user=world.staff)
    assert r.status_code in (200, 400), r.text
    body = r.json()
    for error in body.get("errors", []):
        assert error["extensions"]["code"] != "INTERNAL_SERVER_ERROR", body
