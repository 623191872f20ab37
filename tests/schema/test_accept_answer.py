"""schema.accept_answer: a lone createExport answered without graphql-core's executor gives what
the executor gives for every member of its union, for the errors a resolver raises and for bad
variables; shapes it does not answer are left to the executor."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import OperationDefinitionNode, parse

from desk.core.errors import QuotaExceeded
from desk.work import tasks
from schema import accept_answer
from schema.context import Context
from schema.executor import graphql_schema
from schema.root import build_schema
from tests.schema.run import run
from web.auth import Caller

EVERY = """mutation Make($t: ID!, $q: String) { made: createExport(teamId: $t, filter: {q: $q}) {
  __typename
  ... on Task { id kind status statusLabel progress attempts createdAt t: __typename }
  ... on Problem { message }
  ... on TaskConflict { again: message }
  ... on QuotaExceeded { retryAfter messageKey }
  ... on ValidationProblem { field }
} }"""
NESTED = """mutation($t: ID!, $q: String) { createExport(teamId: $t, filter: {q: $q}) {
  ... on TaskConflict { existingTask { id } } } }"""


def _operation(query: str) -> OperationDefinitionNode:
    found = parse(query).definitions[0]
    assert isinstance(found, OperationDefinitionNode)
    return found


def _ctx(rt, user: int | None) -> Context:
    caller = Caller(user, "cookie") if user is not None else None
    return Context(rt=rt, request=None, request_id="t", caller=caller)


async def _both(rt, user: int | None, variables: dict[str, Any], second: dict[str, Any]) -> tuple:
    """The direct answer for `variables`, then the executor's for `second` (a new filter where
    the first made a task)."""
    direct = await run(EVERY, variables, _ctx(rt, user))
    plain = await run(EVERY, second, _ctx(rt, user), executor=True)
    return direct, plain


def _same(direct, plain) -> None:
    def shown(result) -> tuple:
        data = dict(result.data["made"] or {}) if result.data else None
        if data and "id" in data:
            data["id"] = "<id>"
        return data, [e.formatted for e in result.errors or ()]

    assert shown(direct) == shown(plain)


async def test_every_member_of_the_union_is_answered_as_the_executor_would(
    rt, world, monkeypatch
) -> None:
    plan = accept_answer.plan(graphql_schema(build_schema()), _operation(EVERY))
    assert plan is not None and plan.shapes is not None
    answered: list[object] = []
    real = accept_answer.run

    async def spy(*args: Any) -> Any:
        answered.append(args)
        return await real(*args)

    monkeypatch.setattr(accept_answer, "run", spy)

    direct, plain = await _both(rt, world.staff, {"t": world.team, "q": "d1"}, {"t": world.team, "q": "e1"})  # fmt: skip
    assert direct.data["made"]["__typename"] == "Task" and direct.data["made"]["t"] == "Task"
    _same(direct, plain)

    await tasks.create_export(rt, world.staff, world.team, {"q": "same"})
    direct, plain = await _both(rt, world.staff, {"t": world.team, "q": "same"}, {"t": world.team, "q": "same"})  # fmt: skip
    assert direct.data["made"]["__typename"] == "TaskConflict"
    _same(direct, plain)

    bad = {"t": world.team, "q": "nul\x00"}
    direct, plain = await _both(rt, world.staff, bad, bad)
    assert direct.data["made"]["__typename"] == "ValidationProblem"
    _same(direct, plain)

    elsewhere = {"t": world.other_team, "q": "x"}
    direct, plain = await _both(rt, world.staff, elsewhere, elsewhere)
    assert direct.data["made"]["__typename"] == "NotFound"
    _same(direct, plain)
    assert len(answered) == 4  # each direct run, none of the executor's


async def test_a_quota_refusal_is_answered_as_the_executor_would(rt, world) -> None:
    with pytest.raises(QuotaExceeded):
        for n in range(1000):
            await tasks.create_export(rt, world.admin, world.team, {"q": f"fill{n}"})
    full = {"t": world.team, "q": "over"}
    direct, plain = await _both(rt, world.admin, full, full)
    assert direct.data["made"]["__typename"] == "QuotaExceeded"
    _same(direct, plain)


@pytest.mark.parametrize(
    ("who", "variables"),
    [
        (None, {"t": "1", "q": "anon"}),  # UNAUTHENTICATED, raised by the resolver
        ("staff", {"t": None, "q": "x"}),  # a variable coercion refuses
        ("staff", {"q": "x"}),
        ("staff", {"t": "1", "q": 5}),
    ],
)
async def test_errors_are_the_executors(rt, world, who, variables) -> None:
    user = getattr(world, who) if who else None
    direct = await run(EVERY, variables, _ctx(rt, user))
    plain = await run(EVERY, variables, _ctx(rt, user), executor=True)
    assert direct.errors, direct
    assert direct.data == plain.data
    assert [e.formatted for e in direct.errors] == [e.formatted for e in plain.errors or ()]


async def test_other_shapes_are_left_to_the_executor(rt, world) -> None:
    schema = graphql_schema(build_schema())
    plan = accept_answer.plan(schema, _operation(NESTED))
    assert plan is not None and plan.shapes is None  # the caller is named from memory all the same
    for query in (
        "mutation($t: ID!) { createExport(teamId: $t) { ...F } } fragment F on Task { id }",
        "mutation($t: ID!) { createExport(teamId: $t) { ... on Task { id @skip(if: false) } } }",
        "mutation($t: ID!) { createExport(teamId: $t) { ... on Task { owner { id } } } }",
    ):
        found = accept_answer.plan(schema, _operation(query))
        assert found is not None and found.shapes is None, query
    for query in (
        "mutation($t: ID!) { a: createExport(teamId: $t) { __typename } b: createExport(teamId: $t) { __typename } }",
        "mutation($id: ID!) { cancelTask(taskId: $id) { __typename } }",
        "query { me { id } }",
    ):
        assert accept_answer.plan(schema, _operation(query)) is None, query
    await tasks.create_export(rt, world.staff, world.team, {"q": "nested"})
    variables = {"t": world.team, "q": "nested"}
    got = await run(NESTED, variables, _ctx(rt, world.staff))
    assert got.errors is None and got.data["createExport"]["existingTask"]["id"]


async def test_over_http_the_answer_is_the_executors(api, rt, world) -> None:
    body = await api(EVERY, {"t": world.team, "q": "http"}, user=world.staff)
    plain = await run(EVERY, {"t": world.team, "q": "http2"}, _ctx(rt, world.staff), executor=True)
    assert "errors" not in body
    made = dict(body["data"]["made"], id="<id>")
    assert made == dict(plain.data["made"], id="<id>")
