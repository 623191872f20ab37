"""A lone accept (`createExport`) answered without graphql-core's executor: its resolver is called
as the executor calls it, and the result's fields are serialised directly.

Why: an accept's own work is one statement and one Redis call (issue 25's floor), and the general
executor around it (collecting fields, completing the union, one awaitable per leaf) was a
measurable share of the web's CPU per accept. What is kept: variables and arguments are coerced
by graphql-core (`get_variable_values`, `get_argument_values`), and the field's own resolver —
Strawberry's, with its argument conversion and Info — is called with a `GraphQLResolveInfo` as
`execute_field` builds it; an error it raises is located at the field as the executor locates it,
and the field is then null (it is nullable).

What is an answerable accept, decided once per parsed document (`plan`, cached by
`schema.executor`): a mutation without directives whose one root field is in `ACCEPTS`, with no
directive, selecting only `__typename` and inline fragments on members of its union type (or on an
interface they implement, such as `Problem`), each selecting only fields that have no resolver, no arguments and a scalar or enum
type (as `schema.status_read` answers the status read). Anything else runs through graphql-core
as ever. tests/schema/test_accept_answer.py compares both ways on every result type.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    GraphQLError,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLResolveInfo,
    GraphQLResolveInfoHelpers,
    GraphQLSchema,
    GraphQLUnionType,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    get_argument_values,
    get_variable_values,
    located_error,
)
from graphql.pyutils import Path
from strawberry.execution.is_awaitable import optimized_is_awaitable

from schema.status_read import TYPENAME, Leaf, leaf_of, serialized

# Mutations whose statement checks the caller's session itself (desk/ledger/intake.py), so a
# request that is only one of them may name its caller from memory (web.auth `identify`), and
# answered here.
ACCEPTS = frozenset({"createExport"})


@dataclass(frozen=True)
class Plan:
    node: FieldNode
    key: str  # the root field's response key
    field: GraphQLField
    shapes: dict[str, tuple[Leaf, ...]] | None  # per union member; None: not answered here


def lone_accept(operation: OperationDefinitionNode) -> bool:
    """Whether the operation is a mutation of one accept and nothing else."""
    root = operation.selection_set.selections
    return (
        operation.operation is OperationType.MUTATION
        and not operation.directives
        and len(root) == 1
        and isinstance(root[0], FieldNode)
        and root[0].name.value in ACCEPTS
        and not root[0].directives
    )


def plan(schema: GraphQLSchema, operation: OperationDefinitionNode) -> Plan | None:
    """How to run the lone accept `operation` directly, or None when it is not one."""
    mutation = schema.mutation_type
    if not lone_accept(operation) or mutation is None:
        return None
    node = operation.selection_set.selections[0]
    assert isinstance(node, FieldNode)
    field = mutation.fields.get(node.name.value)
    if field is None:
        return None
    key = node.alias.value if node.alias else node.name.value
    return Plan(node, key, field, _shapes(schema, node, field))


def _shapes(
    schema: GraphQLSchema, node: FieldNode, field: GraphQLField
) -> dict[str, tuple[Leaf, ...]] | None:
    union = field.type
    if not isinstance(union, GraphQLUnionType) or node.selection_set is None:
        return None
    members = {t.name: t for t in union.types}
    shapes: dict[str, dict[str, Leaf]] = {name: {} for name in members}
    for sel in node.selection_set.selections:
        if isinstance(sel, FieldNode) and sel.name.value == TYPENAME and not sel.directives:
            for shape in shapes.values():
                shape.setdefault(_key(sel), Leaf(_key(sel), None, None, True))
            continue
        if not isinstance(sel, InlineFragmentNode) or sel.directives or sel.type_condition is None:
            return None
        condition = schema.get_type(sel.type_condition.name.value)
        applies = [
            m for m in members.values() if condition is not None and _is(schema, m, condition)
        ]
        if not applies:
            return None
        for member in applies:
            for inner in sel.selection_set.selections:
                leaf = _leaf(member, inner)
                if leaf is None:
                    return None
                shapes[member.name].setdefault(leaf.key, leaf)
    return {name: tuple(shape.values()) for name, shape in shapes.items()}


def _is(schema: GraphQLSchema, member: GraphQLObjectType, condition: Any) -> bool:
    """A fragment on `condition` (the member itself, or an interface it implements) applies."""
    return bool(
        condition is member
        or (isinstance(condition, GraphQLInterfaceType) and schema.is_sub_type(condition, member))
    )


def _leaf(member: GraphQLObjectType, sel: Any) -> Leaf | None:
    if not isinstance(sel, FieldNode) or sel.directives or sel.arguments or sel.selection_set:
        return None
    if sel.name.value == TYPENAME:
        return Leaf(_key(sel), None, None, True)
    return leaf_of(member.fields.get(sel.name.value), _key(sel))


def _key(node: FieldNode) -> str:
    return node.alias.value if node.alias else node.name.value


async def run(
    schema: GraphQLSchema,
    found: Plan,
    operation: OperationDefinitionNode,
    variables: dict[str, Any] | None,
    context: Any,
) -> tuple[dict[str, Any] | None, list[GraphQLError]]:
    """(data, errors) of the accept, as graphql-core's `execute` would give them."""
    coerced = get_variable_values(schema, operation.variable_definitions or [], variables or {})
    if isinstance(coerced, list):
        return None, coerced
    mutation = schema.mutation_type
    assert mutation is not None and found.shapes is not None
    path = Path(None, found.key, mutation.name)
    info = GraphQLResolveInfo(
        found.node.name.value, [found.node], found.field.type, mutation, path, schema, {}, None,
        operation, coerced, context, optimized_is_awaitable, None, _HELPERS,  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        args = get_argument_values(found.field, found.node, coerced)
        assert found.field.resolve is not None
        result = await found.field.resolve(None, info, **args)
        return {found.key: _complete(found, result, info)}, []
    except Exception as exc:
        return {found.key: None}, [located_error(exc, [found.node], path.as_list())]


def _complete(found: Plan, result: Any, info: Any) -> dict[str, Any] | None:
    if result is None:
        return None
    union = found.field.type
    assert isinstance(union, GraphQLUnionType) and union.resolve_type is not None
    name = union.resolve_type(result, info, union)
    shape = found.shapes.get(name) if isinstance(name, str) and found.shapes else None
    out = serialized(shape, result, name) if shape is not None and isinstance(name, str) else None
    if out is None:  # not one of the union's members, or a value its type will not take
        raise TypeError(f"{found.key}: a {type(result).__name__} that cannot be answered")
    return out


async def _gather(values: Sequence[Awaitable[Any]]) -> list[Any]:
    return list(await asyncio.gather(*values))


# A resolver of a lone accept awaits its own work; nothing it calls gathers through these.
_HELPERS = GraphQLResolveInfoHelpers(gather=_gather, track=lambda values: None)
