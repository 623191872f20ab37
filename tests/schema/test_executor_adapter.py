"""schema.executor leans on private parts of Strawberry and graphql-core: these tests fail, naming
the part, when an upgrade changes one, and the runner refuses a schema whose Strawberry
extensions it would not run."""

from __future__ import annotations

import asyncio
import re
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import strawberry
from graphql import (
    Executor,
    GraphQLField,
    GraphQLInt,
    GraphQLObjectType,
    GraphQLResolveInfoHelpers,
    GraphQLSchema,
    execute,
    graphql_sync,
    parse,
)
from strawberry.directive import DirectiveLocation
from strawberry.extensions import MaskErrors
from strawberry.resolvers import is_default_resolver
from strawberry.schema.schema import validate_document

from schema import app
from schema.executor import IgnoredExtensions, Runner, _acyclic, graphql_schema
from schema.hardening import LIMIT_RULES
from schema.root import DeskSchema, Mutation, Query, build_schema

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.mark.parametrize("package", ["strawberry-graphql", "graphql-core"])
def test_the_libraries_it_reaches_into_are_pinned_to_what_runs(package: str) -> None:
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    pins = [d for d in dependencies if re.match(rf"{re.escape(package)}\s*==", d)]
    assert len(pins) == 1, (
        f"{package} must be pinned exactly (==): schema.executor uses its insides"
    )
    pinned = pins[0].split("==", 1)[1].strip()
    assert version(package) == pinned, (
        f"{package} {version(package)} runs, {pinned} is pinned: check schema.executor's private "
        "parts against the new version before moving the pin"
    )


def test_strawberrys_private_schema_is_the_graphql_core_schema_it_runs() -> None:
    schema = build_schema()
    built = graphql_schema(schema)
    assert isinstance(built, GraphQLSchema), "Strawberry's Schema._schema changed"
    assert built is schema._schema
    assert graphql_sync(built, "{ __typename }").data == {"__typename": "Query"}
    task = built.get_type("Task")
    assert isinstance(task, GraphQLObjectType) and "statusLabel" in task.fields


def test_strawberrys_validate_document_validates_with_the_given_rules() -> None:
    built = graphql_schema(build_schema())
    rules = Runner(build_schema(), LIMIT_RULES).rules
    ok = parse('query { task(id: "1") { id status } }')
    assert validate_document(built, ok, rules) == []
    wrong = parse('query { task(id: "1") { id xyzzy } }')
    errors = validate_document(built, wrong, rules)
    assert [e.message for e in errors] == ["Cannot query field 'xyzzy' on type 'Task'."]


def test_the_status_reads_leaf_test_sees_strawberrys_default_resolvers() -> None:
    task = graphql_schema(build_schema()).get_type("Task")
    assert isinstance(task, GraphQLObjectType)
    assert is_default_resolver(task.fields["status"].resolve)  # type: ignore[arg-type]
    assert not is_default_resolver(task.fields["owner"].resolve)  # type: ignore[arg-type]


def _probe_schema(seen: list[GraphQLResolveInfoHelpers]) -> GraphQLSchema:
    async def two(_: Any, info: Any) -> int:
        seen.append(info.async_helpers)

        async def one() -> int:
            return 1

        return sum(await info.async_helpers.gather([one(), one()]))

    query = GraphQLObjectType("Query", {"two": GraphQLField(GraphQLInt, resolve=two)})
    return GraphQLSchema(query)


async def _run(schema: GraphQLSchema, executor_class: type[Executor] | None) -> Any:
    result = execute(schema, parse("{ two }"), executor_class=executor_class)
    return await result if asyncio.iscoroutine(result) else result


async def test_graphql_cores_executor_holds_its_own_bound_methods_in_async_helpers() -> None:
    """What `_acyclic` works around: when this fails, graphql-core no longer keeps the cycle and
    `_acyclic` can go (or the attribute moved, and `_acyclic` must follow it)."""
    seen: list[GraphQLResolveInfoHelpers] = []
    result = await _run(_probe_schema(seen), None)  # graphql-core's own executor
    assert result.data == {"two": 2}
    assert isinstance(seen[0], GraphQLResolveInfoHelpers)
    assert isinstance(seen[0].gather.__self__, Executor)  # type: ignore[attr-defined]


async def test_the_acyclic_executor_replaces_them_and_they_still_work() -> None:
    seen: list[GraphQLResolveInfoHelpers] = []
    executor_class = _acyclic(build_schema().execution_context_class)
    assert issubclass(executor_class, Executor)
    result = await _run(_probe_schema(seen), executor_class)
    assert result.errors is None and result.data == {"two": 2}
    assert not hasattr(seen[0].gather, "__self__")  # a closure over a weak reference
    assert seen[0].gather.__qualname__.endswith("Acyclic.__init__.<locals>.gather")


@strawberry.directive(locations=[DirectiveLocation.FIELD])
def shout(value: str) -> str:
    return value.upper()


@pytest.mark.parametrize(
    "extra, named",
    [({"extensions": [MaskErrors]}, "MaskErrors"), ({"directives": [shout]}, "@shout")],
)
def test_a_schema_with_extensions_it_would_skip_is_refused_at_app_start(
    monkeypatch: pytest.MonkeyPatch, settings: Any, extra: dict[str, Any], named: str
) -> None:
    extended = DeskSchema(query=Query, mutation=Mutation, **extra)
    with pytest.raises(IgnoredExtensions, match=named):
        Runner(extended, LIMIT_RULES)
    monkeypatch.setattr(app, "build_schema", lambda prod=False: extended)
    with pytest.raises(IgnoredExtensions):
        app.graphql_router(settings, identify=None)  # type: ignore[arg-type]
