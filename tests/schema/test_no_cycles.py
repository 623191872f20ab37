"""An operation run through graphql-core's executor leaves no reference cycle: its context (and
with it the request, the scope, the caller) is freed by reference counting when the request
ends, not by the cyclic garbage collector, whose full passes stalled every request in flight
(schema.executor `_acyclic`)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from schema.context import Context
from tests.schema.run import run
from web.auth import Caller

QUERY = "query { me { displayName memberships { role team { name } } } }"
MUTATION = 'mutation { createExport(teamId: "@TEAM@") { __typename ... on Task { id status } } }'
REFUSED = 'mutation { createExport(teamId: "999999") { __typename ... on NotFound { message } } }'


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# Not (yet) for GraphQL errors: an error's traceback holds the executor's frames, and so the
# executor; they are rare on the hot paths (refusals are union results, as here).
@pytest.mark.parametrize("which", ["query", "mutation", "refused"])
async def test_the_executed_request_is_freed_without_the_collector(
    rt, world, no_collector, which
) -> None:
    query = {"query": QUERY, "mutation": MUTATION, "refused": REFUSED}[which]
    ctx = Context(rt=rt, request=None, request_id="t", caller=Caller(world.staff, "cookie"))
    result = await run(query.replace("@TEAM@", str(world.team)), None, ctx, executor=True)
    assert result.errors is None and result.data is not None
    if which == "refused":
        assert result.data["createExport"]["__typename"] == "NotFound"
    freed = weakref.ref(ctx)
    del ctx, result
    assert freed() is None, "the request's context is still referenced (a reference cycle?)"
