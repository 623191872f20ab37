"""The GraphQL guards that `schema.executor.Runner` applies: the token limit on parsing
(MAX_TOKENS), the validation rules beyond the standard (a field repeated too often, Strawberry's
`QueryDepthLimiter` and `MaxAliasesLimiter` rules built by their own `create_validator`s, and in
production no introspection), and the cost budget's error (GRAPHQL_MAX_COST, `schema.cost`).

The rule classes are built once, here: the stock limiters build a new class per instance, which
would make every cached validation a miss. The runner keeps parsed and validated documents per
query text, at most CACHE_SIZE of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
)
from graphql.validation import ASTValidationRule, NoSchemaIntrospectionCustomRule
from graphql.validation.validate import ValidationAbortedError
from strawberry.extensions import max_aliases, query_depth_limiter

from schema.errors import QUERY_TOO_COSTLY

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 2000
MAX_REPEATS = 10  # one response name asked for at most this often in one selection set
CACHE_SIZE = 256  # distinct query texts kept parsed and validated


class RepeatedFieldsLimit(ASTValidationRule):
    """Refuse a field repeated under one name (`{ me { id } me { id } ... }`, directly or
    through fragments) more than MAX_REPEATS times in one selection set, before the standard
    rules run: their overlapping-fields check compares every such pair, so 490 repeats within
    the token limit held the event loop for over a second. It runs on entering the document,
    ahead of every other rule, and aborts validation with its own error."""

    def enter_document(self, node: DocumentNode, *_: object) -> None:
        fragments = {
            d.name.value: d for d in node.definitions if isinstance(d, FragmentDefinitionNode)
        }
        for definition in node.definitions:
            if isinstance(definition, OperationDefinitionNode | FragmentDefinitionNode):
                _check_sets(definition.selection_set, fragments)


def _check_sets(top: SelectionSetNode, fragments: dict[str, FragmentDefinitionNode]) -> None:
    stack = [top]
    while stack:
        selections = stack.pop()
        counts: dict[str, int] = {}
        for field in _fields(selections, fragments, set()):
            name = field.alias.value if field.alias else field.name.value
            counts[name] = counts.get(name, 0) + 1
            if counts[name] > MAX_REPEATS:
                raise ValidationAbortedError(
                    f"The field '{name}' is asked for more than {MAX_REPEATS} times in one "
                    "selection set; ask for it once."
                )
        stack += [
            s.selection_set
            for s in selections.selections
            if isinstance(s, FieldNode | InlineFragmentNode) and s.selection_set is not None
        ]


def _fields(
    selections: SelectionSetNode, fragments: dict[str, FragmentDefinitionNode], seen: set[str]
) -> Iterator[FieldNode]:
    """The fields of one selection set, through inline fragments and each named one once."""
    for sel in selections.selections:
        if isinstance(sel, FieldNode):
            yield sel
        elif isinstance(sel, InlineFragmentNode):
            yield from _fields(sel.selection_set, fragments, seen)
        elif isinstance(sel, FragmentSpreadNode) and sel.name.value not in seen:
            seen.add(sel.name.value)
            frag = fragments.get(sel.name.value)
            if frag is not None:
                yield from _fields(frag.selection_set, fragments, seen)


LIMIT_RULES: tuple[type[ASTValidationRule], ...] = (
    RepeatedFieldsLimit,
    query_depth_limiter.create_validator(MAX_DEPTH, None, None),
    max_aliases.create_validator(MAX_ALIASES),
)
PROD_RULES: tuple[type[ASTValidationRule], ...] = (*LIMIT_RULES, NoSchemaIntrospectionCustomRule)


def cost_error(cost: int, budget: int) -> GraphQLError | None:
    """QUERY_TOO_COSTLY when `cost` is over `budget` (GRAPHQL_MAX_COST), else None."""
    if cost <= budget:
        return None
    return GraphQLError(
        f"This query would cost {cost:,}, over the budget of {budget:,} per request "
        "(every field counts once per item of the lists around it; `first` sets a list's "
        "size): ask for fewer items, fields or aliases.",
        extensions={"code": QUERY_TOO_COSTLY, "cost": cost, "budget": budget},
    )
