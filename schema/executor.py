"""Runs one `/graphql` operation beside Strawberry's `Schema.execute`, and is the one module that
touches Strawberry's and graphql-core's private parts to do it.

Why not `Schema.execute`: it builds an ExecutionContext, fresh extension instances and a context
manager per hook on every request, and its ValidationCache hashes the whole document tree to
find its entry; with the cost estimate that was over half of executing the polled status read
(`task(id)`, profiled: 258 µs of which graphql-core's execution ~100 µs). Here a document's
text keys one bounded LRU holding what does not depend on the request: the parsed document (or
its syntax error), its validation errors under the schema's rules, its operations' types and,
when no `first` reads a variable, each operation's cost. Then graphql-core's `execute` runs it
on the same schema with Strawberry's execution context, so types, resolvers and errors are
Strawberry's own; except the plain status read, which `schema.status_read` answers directly, and
a lone `createExport`, whose resolver `schema.accept_answer` calls without the executor.

This runner is the only way taskdesk runs an operation (the endpoint, and the tests through
tests/schema/run.py). It runs no Strawberry extension, so it refuses a schema that has any
(`Runner` raises `IgnoredExtensions` at app start) instead of ignoring them. Its guards, in
order (`schema.hardening`): the token limit on parsing, the operation type, the limit rules
(and no introspection in production) on validation, the cost budget before any resolver; errors
go through `DeskSchema.process_errors` (suggestions stripped in production, logged with the
request id). Production's masking of unexpected errors is the caller's (`schema.app` shows
every error through `schema.errors.shown`).

The private parts it uses, each pinned exactly in pyproject.toml and checked by
tests/schema/test_executor_adapter.py (which fails when one changes):
- Strawberry's `Schema._schema`, the graphql-core schema it built: there is no public accessor
  (the maintainers point users to `_schema`: strawberry-graphql/strawberry#2590). Read once,
  when the runner is built. It can go when Strawberry exposes the schema publicly.
- Strawberry's `validate_document` (its validation with its own MaybeNull and OneOf rules; not
  exported). It can go with the cache, if Strawberry's ValidationCache stops hashing documents.
- graphql-core's executor attribute `async_helpers` (`_acyclic`): replaced per executor to break
  a reference cycle. It can go when graphql-core's `Executor` stops holding its own bound
  methods (still so in 3.3.2; the cost of the collector under async resolvers is
  graphql-python/graphql-core#190).
Public, if undocumented: Strawberry's `execution_context_class` (a constructor argument) and
`optimized_is_awaitable` (exported by its module), passed to `execute` as Strawberry passes them.
Errors go through the schema's public `process_errors` hook, and `schema.status_read` tells a
default resolver by Strawberry's public `is_default_resolver`.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from inspect import isawaitable
from typing import Any

from graphql import (
    DocumentNode,
    ExecutionResult,
    FragmentDefinitionNode,
    GraphQLError,
    GraphQLResolveInfoHelpers,
    GraphQLSchema,
    OperationDefinitionNode,
    execute,
    parse,
)
from graphql.validation import specified_rules
from strawberry import Schema
from strawberry.exceptions import MissingQueryError
from strawberry.execution.is_awaitable import optimized_is_awaitable
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.schema.schema import validate_document
from strawberry.types import ExecutionContext
from strawberry.types.graphql import OperationType

from schema import accept_answer, status_read
from schema.context import Context
from schema.cost import estimate_cost
from schema.hardening import CACHE_SIZE, MAX_TOKENS, cost_error
from schema.status_read import Plan


@dataclass
class Prepared:
    """What a document's text alone determines (shared by every request sending it)."""

    document: DocumentNode | None
    errors: list[GraphQLError]  # its syntax error, or its validation errors
    operations: dict[str | None, OperationDefinitionNode]  # by name; None: the first
    fragments: dict[str, FragmentDefinitionNode]
    costs: dict[str | None, int] = field(default_factory=dict)  # when no variable decides it
    plans: dict[str | None, Plan | None] = field(default_factory=dict)
    accepts: dict[str | None, accept_answer.Plan | None] = field(default_factory=dict)


class IgnoredExtensions(RuntimeError):
    """The schema has Strawberry extensions (or custom directives, which run as one) that this
    runner would not run."""


def graphql_schema(schema: Schema) -> GraphQLSchema:
    """The graphql-core schema Strawberry built (private: see the module's docstring)."""
    built = schema._schema
    if not isinstance(built, GraphQLSchema):  # pragma: no cover - Strawberry changed
        raise TypeError(f"Strawberry's Schema._schema is a {type(built).__name__} now")
    return built


def refuse_extensions(schema: Schema) -> None:
    """Raise when `schema` would run extensions through `Schema.execute`: this runner would skip
    them silently (a tracing or masking extension added later would never run)."""
    ignored = [getattr(e, "__name__", type(e).__name__) for e in schema.extensions]
    ignored += [f"@{d.graphql_name or d.python_name}" for d in schema.directives]
    if ignored:
        raise IgnoredExtensions(
            f"the GraphQL runner (schema.executor) does not run Strawberry extensions or custom "
            f"directives; this schema has {', '.join(ignored)}: run them here or remove them"
        )


@cache
def _acyclic(executor_class: type[Any]) -> type[Any]:
    """`executor_class` whose resolver helpers do not hold the executor itself.

    Why: graphql-core's executor keeps two of its own bound methods in `async_helpers`, a
    reference cycle, so every executed request (its executor, context, request, scope: ~90
    objects) was freed only by the cyclic garbage collector, whose passes then ran for up to
    ~140 ms at a time under load, stalling every request in flight (the trigger's p99,
    measured). Weak references break the cycle; the helpers are only called by resolvers,
    while the executor runs. Copies of an executor (defer/stream, subscriptions: neither is
    served) would share them as graphql-core's own do."""

    class Acyclic(executor_class):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            me = weakref.ref(self)

            def gather(values: Sequence[Awaitable[Any]]) -> Awaitable[list[Any]]:
                work: Awaitable[list[Any]] = _alive(me).gather_async_work(values)
                return work

            def track(values: Sequence[Any]) -> None:
                _alive(me).track_async_work(values)

            self.async_helpers = GraphQLResolveInfoHelpers(gather=gather, track=track)

    Acyclic.__name__ = Acyclic.__qualname__ = f"Acyclic{executor_class.__name__}"
    return Acyclic


def _alive(ref: weakref.ref[Any]) -> Any:
    executor = ref()
    if executor is None:  # pragma: no cover - a resolver outliving its execution
        raise RuntimeError("the GraphQL execution has ended")
    return executor


class Runner:
    """Runs operations on one schema; `rules` are its validation rules beyond the standard."""

    def __init__(self, schema: Schema, rules: Iterable[type[Any]]) -> None:
        refuse_extensions(schema)
        self.schema = schema
        self.graphql = graphql_schema(schema)
        self.rules = (*specified_rules, *rules)
        self._kwargs: dict[str, Any] = {"operation_extensions": None}
        if schema.execution_context_class is not None:
            self._kwargs["executor_class"] = _acyclic(schema.execution_context_class)  # type: ignore[arg-type]
        self._prepared: OrderedDict[str, Prepared] = OrderedDict()

    def prepare(self, query: str) -> Prepared:
        found = self._prepared.get(query)
        if found is not None:
            self._prepared.move_to_end(query)
            return found
        found = self._prepare(query)
        self._prepared[query] = found
        if len(self._prepared) > CACHE_SIZE:
            self._prepared.popitem(last=False)
        return found

    def _prepare(self, query: str) -> Prepared:
        try:
            document = parse(query, max_tokens=MAX_TOKENS)
        except GraphQLError as error:
            return Prepared(None, [error], {}, {})
        operations: dict[str | None, OperationDefinitionNode] = {}
        fragments: dict[str, FragmentDefinitionNode] = {}
        for d in document.definitions:
            if isinstance(d, OperationDefinitionNode):
                operations.setdefault(None, d)
                if d.name is not None:
                    operations.setdefault(d.name.value, d)
            elif isinstance(d, FragmentDefinitionNode):
                fragments[d.name.value] = d
        errors = validate_document(self.graphql, document, self.rules)
        return Prepared(document, errors, operations, fragments)

    async def run(
        self,
        query: str,
        variables: dict[str, Any] | None,
        context: Any,
        operation_name: str | None,
        allowed: Iterable[OperationType],
        budget: int,
    ) -> ExecutionResult:
        """As `schema.execute(...)`: raises what it raises for a missing or refused operation,
        returns errors the same way for the rest."""
        if not query:
            raise MissingQueryError
        prepared = self.prepare(query)
        if prepared.document is None:
            return self._failed(prepared.errors, query, variables, context)
        operation = prepared.operations.get(operation_name)
        if operation is None:
            raise CannotGetOperationTypeError(operation_name)
        kind = OperationType(operation.operation.value)
        if kind not in allowed:
            raise InvalidOperationTypeError(kind)
        if prepared.errors:
            return self._failed(prepared.errors, query, variables, context)
        name = operation.name.value if operation.name else None
        too_costly = cost_error(self._cost(prepared, operation, name, variables), budget)
        if too_costly is not None:
            return self._failed([too_costly], query, variables, context)
        data = self._direct(prepared, operation, variables, context)
        if data is not None:
            return ExecutionResult(data=data)
        accepted = await self._accepted(prepared, operation, variables, context)
        if accepted is not None:
            if accepted.errors:
                self._process(accepted.errors, query, variables, context)
            return accepted
        result = execute(
            self.graphql,
            prepared.document,
            context_value=context,
            variable_values=variables,
            operation_name=name,
            is_awaitable=optimized_is_awaitable,  # type: ignore[arg-type]  # as Strawberry passes it
            **self._kwargs,
        )
        if isawaitable(result):
            result = await result
        assert isinstance(result, ExecutionResult)
        if result.errors:
            self._process(result.errors, query, variables, context)
        return result

    def _cost(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        name: str | None,
        variables: dict[str, Any] | None,
    ) -> int:
        known = prepared.costs.get(name)
        if known is not None:
            return known
        cost, by_variable = estimate_cost(self.graphql, operation, prepared.fragments, variables)
        if not by_variable:
            prepared.costs[name] = cost
        return cost

    def status_read(
        self, query: str, variables: dict[str, Any] | None, operation_name: str | None
    ) -> int | None:
        """The task id when the operation to run is a valid status read (`status_read.plan`),
        so the caller and the task can be read together; else None."""
        valid = self._valid(query, operation_name)
        found = self._plan(*valid) if valid else None
        return None if found is None else status_read.task_id(found, variables)

    def accepting(self, query: str, operation_name: str | None) -> bool:
        """Whether the operation to run is a valid lone accept (`accept_answer.ACCEPTS`): its
        caller may be named from memory, as its statement checks the session again."""
        valid = self._valid(query, operation_name)
        return valid is not None and self._accept(*valid) is not None

    def _valid(
        self, query: str, operation_name: str | None
    ) -> tuple[Prepared, OperationDefinitionNode] | None:
        """The document's operation to run, when the document parsed and validated."""
        prepared = self.prepare(query)
        operation = prepared.operations.get(operation_name)
        return None if operation is None or prepared.errors else (prepared, operation)

    def _accept(
        self, prepared: Prepared, operation: OperationDefinitionNode
    ) -> accept_answer.Plan | None:
        name = operation.name.value if operation.name else None
        if name not in prepared.accepts:
            prepared.accepts[name] = accept_answer.plan(self.graphql, operation)
        return prepared.accepts[name]

    def _plan(self, prepared: Prepared, operation: OperationDefinitionNode) -> Plan | None:
        name = operation.name.value if operation.name else None
        if name not in prepared.plans:
            prepared.plans[name] = status_read.plan(self.graphql, operation)
        return prepared.plans[name]

    def _direct(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        variables: dict[str, Any] | None,
        context: Any,
    ) -> dict[str, Any] | None:
        """The status read's answer without graphql-core's executor, if it is one."""
        found = self._plan(prepared, operation)
        if found is None or not isinstance(context, Context):
            return None
        return status_read.answer(found, variables, context)

    async def _accepted(
        self,
        prepared: Prepared,
        operation: OperationDefinitionNode,
        variables: dict[str, Any] | None,
        context: Any,
    ) -> ExecutionResult | None:
        """A lone accept's result without graphql-core's executor, if it can be answered so."""
        found = self._accept(prepared, operation)
        if found is None or found.shapes is None:
            return None
        data, errors = await accept_answer.run(self.graphql, found, operation, variables, context)
        return ExecutionResult(data=data, errors=errors or None)

    def _failed(
        self,
        errors: list[GraphQLError],
        query: str,
        variables: dict[str, Any] | None,
        context: Any,
    ) -> ExecutionResult:
        errors = list(errors)  # cached errors are shared; the list handed out is not
        self._process(errors, query, variables, context)
        return ExecutionResult(data=None, errors=errors)

    def _process(
        self,
        errors: list[GraphQLError],
        query: str,
        variables: dict[str, Any] | None,
        context: Any,
    ) -> None:
        """The schema's public error hook (`DeskSchema.process_errors`: suggestions stripped in
        production, every error logged with the request id)."""
        execution = ExecutionContext(
            query=query,
            schema=self.schema,
            allowed_operations=(),
            context=context,
            variables=variables,
        )
        self.schema.process_errors(errors, execution)
