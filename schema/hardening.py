"""The schema's guards and caches, as two Strawberry extensions.

- `Hardening` applies, in one `on_operation` hook: the token limit of `MaxTokensLimiter`, the
  rules of `QueryDepthLimiter` and `MaxAliasesLimiter` (built by Strawberry's own
  `create_validator`s) and, in production, `DisableIntrospection`'s rule and the masking of
  unexpected errors (`MaskUnexpected`); and, in its `on_execute` hook (after validation, with
  the variables known), the cost budget of `schema.cost` (GRAPHQL_MAX_COST).
- `Caches` is Strawberry's `ParserCache` and `ValidationCache` in one extension.

Why not the seven stock extensions side by side: Strawberry wraps every hook of every extension
in a fresh context manager on every request, which cost more than validating the status query
itself (the hot `task(id)` read is polled by every open page). Two extensions with four hooks
keep the same behaviour at a fraction of that. The rule classes are built once, here: the stock
limiters build a new class per instance, which would make every ValidationCache lookup a miss.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

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
from strawberry.extensions import (
    ParserCache,
    SchemaExtension,
    ValidationCache,
    max_aliases,
    query_depth_limiter,
)
from strawberry.types import ExecutionContext

from schema.cost import operation_cost
from schema.errors import QUERY_TOO_COSTLY, MaskUnexpected

MAX_DEPTH = 10
MAX_ALIASES = 30
MAX_TOKENS = 2000
MAX_REPEATS = 10  # one response name asked for at most this often in one selection set
DEFAULT_MAX_COST = 10_000  # GRAPHQL_MAX_COST, for a context without settings
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


class Hardening(SchemaExtension):
    """Limits for everybody; no introspection and masked unexpected errors in production."""

    rules = LIMIT_RULES
    mask = False

    def on_operation(self) -> Iterator[None]:
        context = self.execution_context
        context.parse_options["max_tokens"] = MAX_TOKENS
        context.validation_rules = (*context.validation_rules, *self.rules)
        yield
        result = context.result
        if self.mask and result is not None and getattr(result, "errors", None):
            masker = MaskUnexpected()
            masker.execution_context = context
            masker._process_result(result)

    def on_execute(self) -> Iterator[None]:
        """After validation, before any resolver: refuse an operation over the cost budget (it
        needs the variables, so it cannot be a cached validation rule)."""
        context = self.execution_context
        document = context.graphql_document
        if document is not None:
            check_cost(context, document.definitions)
        yield


def check_cost(context: ExecutionContext, definitions: Sequence[object]) -> None:
    operations = [d for d in definitions if isinstance(d, OperationDefinitionNode)]
    name = context.operation_name
    chosen = next((o for o in operations if o.name and o.name.value == name), None)
    operation = chosen or (operations[0] if len(operations) == 1 else None)
    if operation is None:
        return
    fragments = {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}
    settings = getattr(getattr(context.context, "rt", None), "settings", None)
    budget = getattr(settings, "graphql_max_cost", DEFAULT_MAX_COST)
    cost = operation_cost(context.schema._schema, operation, fragments, context.variables)
    error = cost_error(cost, budget)
    if error is not None:
        raise error


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


class ProdHardening(Hardening):
    rules = PROD_RULES
    mask = True


class Caches(ParserCache, ValidationCache):
    """Parsed and validated documents, kept per query text (bounded LRU, shared process-wide)."""

    def __init__(self) -> None:
        ParserCache.__init__(self, maxsize=CACHE_SIZE)
        ValidationCache.__init__(self, maxsize=CACHE_SIZE)
