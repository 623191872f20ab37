"""The cost of a GraphQL operation, estimated from its document before anything runs.

Every field costs 1, times the size of each list around it. A field with a `first` argument
sets the size of the list it returns (a connection's `edges`/`nodes`, or the field itself when
it is a list); it defaults to the argument's default, and a larger `last` counts instead. Any
other list counts as `OTHER_LIST` items. So `tickets(first: 200) { nodes { id team { members {
role } } } }` costs 1 + 200 x (1 + 1 + (1 + 20 x (1 + 1))) = 8,601, and 30 aliases of it 30
times that.
Introspection (`__schema`, `__type`) is left to the depth limit and production's switch.
"""

from __future__ import annotations

from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLField,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
)
from graphql.type.definition import GraphQLInterfaceType, GraphQLNamedType, GraphQLUnionType

OTHER_LIST = 20  # a list without `first` (a team's members, memberships, ...)
Composite = GraphQLObjectType | GraphQLInterfaceType | GraphQLUnionType


class _Estimate:
    def __init__(
        self,
        schema: GraphQLSchema,
        fragments: dict[str, FragmentDefinitionNode],
        variables: dict[str, Any],
        defaults: dict[str, Any] | None = None,
    ) -> None:
        self.schema = schema
        self.fragments = fragments
        self.variables = variables
        self.defaults = defaults or {}
        self.by_variable = False  # whether a variable's value decided a list's size

    def first(self, node: FieldNode, field: GraphQLField) -> int | None:
        if "first" not in field.args:
            return None
        size = self._given(node, "first", missing=1)
        if size is None:
            default = field.args["first"].default_value
            size = default if isinstance(default, int) else OTHER_LIST
        if "last" in field.args:  # a page from the end (`Ticket.messages`): as many rows
            size = max(size, self._given(node, "last", missing=None) or 0)
        return size

    def _given(self, node: FieldNode, name: str, missing: int | None) -> int | None:
        """The value of argument `name` as execution will use it; None when it is not given.
        `missing`: what a variable without a value counts as."""
        for arg in node.arguments or ():
            if arg.name.value != name:
                continue
            value = arg.value
            if isinstance(value, VariableNode):
                # Count what execution will use: a variable left out takes its declared default,
                # and GraphQL's Int accepts an integral float (`200.0` runs as 200).
                variable = value.name.value
                self.by_variable = True
                given = self.variables.get(variable, self.defaults.get(variable))
                if given is None:
                    return missing
                if isinstance(given, float) and given.is_integer():
                    given = int(given)
                if isinstance(given, bool) or not isinstance(given, int):
                    return 1  # not an Int: coercion refuses it before anything runs
                return max(1, given)
            if isinstance(value, IntValueNode):
                return max(1, int(value.value))
        return None

    def fields(
        self, selections: SelectionSetNode, parent: Composite, seen: frozenset[str]
    ) -> list[tuple[FieldNode, Composite]]:
        """The field nodes of a selection set, through fragments, each with its parent type."""
        out: list[tuple[FieldNode, Composite]] = []
        for sel in selections.selections:
            if isinstance(sel, FieldNode):
                out.append((sel, parent))
            elif isinstance(sel, InlineFragmentNode):
                cond = sel.type_condition
                typ = self.schema.get_type(cond.name.value) if cond else parent
                out += self.fields(sel.selection_set, typ or parent, seen)  # type: ignore[arg-type]
            elif isinstance(sel, FragmentSpreadNode) and sel.name.value not in seen:
                frag = self.fragments.get(sel.name.value)
                if frag is not None:
                    typ = self.schema.get_type(frag.type_condition.name.value)
                    inner = seen | {sel.name.value}
                    out += self.fields(frag.selection_set, typ or parent, inner)  # type: ignore[arg-type]
        return out

    def cost(self, selections: SelectionSetNode, parent: Composite, pending: int | None) -> int:
        """`pending`: the size a `first` above set for the next list down (edges, nodes)."""
        total = 0
        for node, typ in self.fields(selections, parent, frozenset()):
            name = node.name.value
            if name.startswith("__"):
                total += 1
                continue
            field = getattr(typ, "fields", {}).get(name)
            if field is None:
                total += 1
                continue
            first = self.first(node, field)
            inner = field.type.of_type if isinstance(field.type, GraphQLNonNull) else field.type
            size, child_pending = 1, first
            if isinstance(inner, GraphQLList):
                size = first or pending or OTHER_LIST
                child_pending = None
            named: GraphQLNamedType = _named(field.type)
            child = 0
            if node.selection_set is not None and isinstance(named, Composite):
                child = self.cost(node.selection_set, named, child_pending)
            total += size * (1 + child)
        return total


def _named(typ: Any) -> GraphQLNamedType:
    while isinstance(typ, (GraphQLNonNull, GraphQLList)):
        typ = typ.of_type
    return typ  # type: ignore[no-any-return]


def estimate_cost(
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    fragments: dict[str, FragmentDefinitionNode],
    variables: dict[str, Any] | None,
) -> tuple[int, bool]:
    """(the cost, whether a variable decided it): a cost no variable decides is the same for
    every request sending that document, so schema.executor keeps it with the parsed document."""
    root = schema.get_root_type(operation.operation)
    if root is None:
        return 0, False
    defaults = {
        d.variable.name.value: _int_default(d.default_value)
        for d in operation.variable_definitions or ()
        if d.default_value is not None
    }
    estimate = _Estimate(schema, fragments, variables or {}, defaults)
    cost = estimate.cost(operation.selection_set, root, None)
    return cost, estimate.by_variable


def _int_default(node: Any) -> int | None:
    return int(node.value) if isinstance(node, IntValueNode) else None
