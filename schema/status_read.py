"""The status read (`task(id)`): its one detector, and its direct answer (without graphql-core's
executor) for the task's own values, from the task read together with the caller.

Why: every open page polls it; after parsing, validation and the cost were cached
(`schema.executor`), graphql-core's execution of ten leaf fields was still ~40 % of the GraphQL
work of the read (profiled: a coroutine, an awaitable completion and a resolve-info per field).

What is a status read, decided once per parsed document (`plan`, cached by `schema.executor`): a
query operation without directives whose one root field is `task` (no directives) with the one
argument `id`: a literal, or a variable declared `ID`/`ID!` and the operation's only one. Then
`schema.app` reads the caller and the task in one statement (`task_id`). It is answered here
when it also selects only `__typename` and fields of `Task` that have no resolver, no
arguments and a scalar or enum type, with no fragments and no directives (`Plan.leaves`). Each value is what
Strawberry's resolver for that field returns, serialised by the field's own GraphQL type, as
graphql-core's leaf completion does. Anything else — the anonymous, a value that will not
serialise, a null where the schema says non-null, a task not read with the caller — returns
None, and the operation runs through graphql-core as ever. tests/schema/test_status_answer.py
compares both on every field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    GraphQLEnumType,
    GraphQLField,
    GraphQLNonNull,
    GraphQLScalarType,
    GraphQLSchema,
    IntValueNode,
    NamedTypeNode,
    NonNullTypeNode,
    OperationDefinitionNode,
    OperationType,
    StringValueNode,
    Undefined,
    VariableNode,
)
from strawberry.resolvers import is_default_resolver

from desk.reads import lookups
from schema.context import Context
from schema.types import Task

TYPENAME = "__typename"


@dataclass(frozen=True)
class Leaf:
    key: str  # the response key (the alias, or the field's name)
    field: GraphQLField | None  # None for __typename
    serialize: Any
    non_null: bool


@dataclass(frozen=True)
class Plan:
    key: str  # the root field's response key
    variable: str | None  # the variable naming the id, or None for a literal
    literal: str | None
    leaves: tuple[Leaf, ...] | None  # None: a status read, but one for the executor to answer


def plan(schema: GraphQLSchema, operation: OperationDefinitionNode) -> Plan | None:
    """The status read `operation` is (and how to answer it directly, if it can be), or None
    when it is not one."""
    if operation.operation is not OperationType.QUERY or operation.directives:
        return None
    root = operation.selection_set.selections
    if len(root) != 1 or not isinstance(root[0], FieldNode) or root[0].name.value != "task":
        return None
    node = root[0]
    arguments = node.arguments or ()
    if node.directives or len(arguments) != 1 or arguments[0].name.value != "id":
        return None
    value = arguments[0].value
    variable, literal = None, None
    if isinstance(value, VariableNode):
        variable = value.name.value
        if not _only_id_variable(operation, variable):
            return None
    elif isinstance(value, StringValueNode | IntValueNode):
        if operation.variable_definitions:
            return None
        literal = value.value
    else:
        return None
    return Plan(_key(node), variable, literal, _leaves(schema, node))


def _only_id_variable(operation: OperationDefinitionNode, name: str) -> bool:
    definitions = operation.variable_definitions or ()
    if len(definitions) != 1 or definitions[0].variable.name.value != name:
        return False
    declared = definitions[0].type
    if isinstance(declared, NonNullTypeNode):
        declared = declared.type
    return isinstance(declared, NamedTypeNode) and declared.name.value == "ID"


def _leaves(schema: GraphQLSchema, node: FieldNode) -> tuple[Leaf, ...] | None:
    task_type = schema.get_type("Task")
    if node.selection_set is None or task_type is None:
        return None
    fields: dict[str, GraphQLField] = getattr(task_type, "fields", {})
    leaves: list[Leaf] = []
    for sel in node.selection_set.selections:
        if not isinstance(sel, FieldNode) or sel.directives or sel.arguments:
            return None
        name = sel.name.value
        if name == TYPENAME:
            leaves.append(Leaf(_key(sel), None, None, True))
            continue
        leaf = leaf_of(fields.get(name), _key(sel)) if sel.selection_set is None else None
        if leaf is None:
            return None
        leaves.append(leaf)
    return tuple(leaves)


def leaf_of(field: GraphQLField | None, key: str) -> Leaf | None:
    """`field` as a leaf answered directly: a default resolver and a scalar or enum type."""
    if field is None or field.resolve is None or not is_default_resolver(field.resolve):
        return None
    non_null = isinstance(field.type, GraphQLNonNull)
    named = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
    if not isinstance(named, GraphQLScalarType | GraphQLEnumType):
        return None
    return Leaf(key, field, named.serialize, non_null)


def serialized(leaves: tuple[Leaf, ...], obj: Any, typename: str) -> dict[str, Any] | None:
    """The leaves of `obj` (of the GraphQL type `typename`) as graphql-core's leaf completion
    gives them; None when one will not serialise or is null where the schema says non-null."""
    out: dict[str, Any] = {}
    for leaf in leaves:
        if leaf.field is None:
            out[leaf.key] = typename
            continue
        value = leaf.field.resolve(obj, None)  # type: ignore[misc]  # a default resolver
        if value is not None:
            value = leaf.serialize(value)
            if value is None or value is Undefined:
                return None
        elif leaf.non_null:
            return None
        out[leaf.key] = value
    return out


def _key(node: FieldNode) -> str:
    return node.alias.value if node.alias else node.name.value


def task_id(found: Plan, variables: dict[str, Any] | None) -> int | None:
    """The id the status read asks for, or None when its value is not one (coercion then
    reports it, or finds no task)."""
    if found.variable is None:
        return lookups.parse_id(found.literal)
    raw = (variables or {}).get(found.variable)
    if type(raw) is int:  # GraphQL's ID takes an integer as its decimal text (no bool)
        raw = str(raw)
    return lookups.parse_id(raw) if isinstance(raw, str) else None


def answer(found: Plan, variables: dict[str, Any] | None, ctx: Context) -> dict[str, Any] | None:
    """The `data` of the status read, or None: then run it the usual way."""
    if ctx.caller is None or found.leaves is None:
        return None
    wanted = task_id(found, variables)
    hit = ctx.tasks_read.get(wanted) if wanted is not None else None
    if hit is None:
        return None
    if hit.task is None:  # missing, or not the caller's to see: the same null
        return {found.key: None}
    task = Task.from_model(hit.task, ctx.now(), ctx.caller.user_id)
    out = serialized(found.leaves, task, "Task")
    return None if out is None else {found.key: out}
