"""Running an operation in-process (no web app around it) the way the endpoint does: through
`schema.executor.Runner`, with the same guards. `executor=True` skips the direct answers
(`schema.status_read`, `schema.accept_answer`), so a test can compare them with graphql-core's
executor."""

from __future__ import annotations

from typing import Any

from graphql import ExecutionResult

from schema.app import ALLOWED_OPERATIONS
from schema.executor import Runner
from schema.hardening import LIMIT_RULES
from schema.root import build_schema

BUDGET = 10_000  # GRAPHQL_MAX_COST's default


class _ExecutorOnly(Runner):
    def _direct(self, *_: Any) -> dict[str, Any] | None:
        return None

    async def _accepted(self, *_: Any) -> ExecutionResult | None:
        return None


async def run(
    query: str,
    variables: dict[str, Any] | None,
    context: Any,
    *,
    executor: bool = False,
    operation_name: str | None = None,
) -> ExecutionResult:
    runner = (_ExecutorOnly if executor else Runner)(build_schema(), LIMIT_RULES)
    return await runner.run(query, variables, context, operation_name, ALLOWED_OPERATIONS, BUDGET)
