"""schema.status_read: the plain status read answered without graphql-core's executor gives exactly
what the executor gives (every leaf field of Task, aliases, __typename, a hidden task), and
every other shape of query is left to the executor."""

from __future__ import annotations

import pytest
from graphql import OperationDefinitionNode, parse

from desk.reads import tasks as reads
from schema import status_read
from schema.context import Context
from schema.executor import graphql_schema
from schema.root import build_schema
from tests.schema.run import run
from tests.schema.scene import make_scene
from web.auth import Caller

LEAVES = """query Status($id: ID!) { task(id: $id) {
  __typename id kind status statusLabel progress progressMessage attempts maxAttempts lastError
  note runAt dispatchedAt createdAt startedAt finishedAt resultSummary resultSummaryKey resultSummaryParams
  expiresAt downloadUrl canCancel canRetry again: status t: __typename
} }"""
ALIASED = 'query { read: task(id: "@ID@") { id s: statusLabel } }'


def _operation(query: str) -> OperationDefinitionNode:
    found = parse(query).definitions[0]
    assert isinstance(found, OperationDefinitionNode)
    return found


async def _context(rt, user: int, task_id: int) -> Context:
    ctx = Context(rt=rt, request=None, request_id="t", caller=Caller(user, "cookie"))
    ctx.tasks_read[task_id] = await reads.task(rt.pg, user, task_id)
    return ctx


@pytest.mark.parametrize("who", ["admin", "staff", "customer", "outsider"])
async def test_the_direct_answer_is_the_executors(api, rt, world, who) -> None:
    scene = await make_scene(rt, world)
    schema = graphql_schema(build_schema())
    user = getattr(world, who)
    for task_id in (scene.staff_export, scene.customer_export, scene.failed_export, scene.reminder):
        for query, variables in (
            (LEAVES, {"id": str(task_id)}),
            (LEAVES, {"id": task_id}),  # an Int for an ID: its decimal text
            (ALIASED.replace("@ID@", str(task_id)), None),
        ):
            ctx = await _context(rt, user, task_id)
            plan = status_read.plan(schema, _operation(query))
            assert plan is not None
            direct = status_read.answer(plan, variables, ctx)
            assert direct is not None
            plain = await run(query, variables, ctx, executor=True)
            assert plain.errors is None and direct == plain.data
            over_http = await api(query, variables, user=user)
            assert over_http == {"data": plain.data}


async def test_anything_else_goes_through_the_executor(rt, world) -> None:
    schema = graphql_schema(build_schema())
    refused = [
        "query($id: ID!) { task(id: $id) { id owner { id } } }",  # a field with a resolver
        "query($id: ID!) { task(id: $id) { ...F } } fragment F on Task { id }",
        "query($id: ID!) { task(id: $id) { id @include(if: true) } }",
        "query($id: ID!) { task(id: $id) { id } me { id } }",
        "query($id: ID!, $x: Int) { task(id: $id) { id } }",  # another variable to coerce
        "query($id: String!) { task(id: $id) { id } }",
        "mutation($id: ID!) { cancelTask(taskId: $id) { __typename } }",
    ]
    for query in refused:
        found = status_read.plan(schema, _operation(query))
        assert found is None or found.leaves is None, query  # no direct answer
    plan = status_read.plan(schema, _operation("query($id: ID!) { task(id: $id) { id } }"))
    assert plan is not None
    anonymous = Context(rt=rt, request=None, request_id="t")
    assert status_read.answer(plan, {"id": "1"}, anonymous) is None
    not_read = Context(rt=rt, request=None, request_id="t", caller=Caller(world.staff, "cookie"))
    assert status_read.answer(plan, {"id": "1"}, not_read) is None  # not read with the caller
    read = not_read
    read.tasks_read[1] = reads.TaskHit(None)
    assert status_read.answer(plan, {"id": "1"}, read) == {"task": None}
    for odd in (True, 1.0, None, ["1"]):
        assert status_read.answer(plan, {"id": odd}, read) is None  # coercion's to refuse


NEAR_MISSES = [
    # two root fields, aliased
    'query { a: task(id: "@ID@") { id } b: task(id: "@ID@") { id } }',
    "query($id: ID!) { task(id: $id) { ...F } } fragment F on Task { id }",
    "query($id: ID!) { task(id: $id) { ... on Task { id } } }",
    "query($id: ID!) { task(id: $id) { id @include(if: true) } }",
    "query($id: ID!) { task(id: $id) @include(if: true) { id } }",
    "query($id: ID!) { task(id: $id) { id a: status @skip(if: false) } }",
    "query($id: ID!, $x: Int) { task(id: $id) { id } }",
    "query($id: String!) { task(id: $id) { id } }",
    "query($id: ID) { task(id: $id) { id } }",
    "query($id: ID!) { task(id: $id) { id } me { id } }",
    "query($id: ID!) { __typename task(id: $id) { id } }",
    "query($id: ID!) { task(id: $id) { id owner { id } } }",
    "mutation($id: ID!) { cancelTask(taskId: $id) { __typename } }",
]


@pytest.mark.parametrize("query", NEAR_MISSES)
async def test_near_misses_take_the_executor(rt, world, monkeypatch, query) -> None:
    """Through the runner the endpoint uses: never a direct answer, and the executor's result."""
    scene = await make_scene(rt, world)
    task_id = scene.staff_export
    query = query.replace("@ID@", str(task_id))
    variables = {"id": str(task_id)} if "$id" in query else None
    if "$id: String" in query:
        variables = {"id": str(task_id)}
    direct_answers: list[object] = []
    real_answer = status_read.answer

    def spy(*args):
        direct_answers.append(real_answer(*args))
        return direct_answers[-1]

    monkeypatch.setattr(status_read, "answer", spy)
    ctx = await _context(rt, world.staff, task_id)
    got = await run(query, variables, ctx)
    assert all(a is None for a in direct_answers), "the executor answered"
    plain = await run(query, variables, ctx, executor=True)
    assert got.data == plain.data
    assert [e.message for e in got.errors or ()] == [e.message for e in plain.errors or ()]
