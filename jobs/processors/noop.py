"""NOOP: a trivial task for benchmarks and tests. Its filters script its behaviour:
`fail_times` (raise a retryable error on the first N attempts), `permanent` (fail at once),
`steps` and `step_seconds` (report progress N times, pausing between)."""

from __future__ import annotations

import asyncio

from desk import ledger_run
from jobs.execution import Execution
from jobs.outcomes import LostFence, Permanent


class ScriptedFailure(RuntimeError):
    pass


async def process(ex: Execution) -> None:
    script = ex.row.filters or {}
    if script.get("permanent"):
        raise Permanent("Scripted permanent failure.")
    if ex.row.attempts <= int(script.get("fail_times", 0)):
        raise ScriptedFailure(f"scripted failure on attempt {ex.row.attempts}")
    steps = int(script.get("steps", 0))
    for i in range(steps):
        await asyncio.sleep(float(script.get("step_seconds", 0.05)))
        await ex.progress(current=i + 1, total=steps, message=f"step {i + 1} / {steps}")
    # One fenced autocommit statement, repeated on a transient error: a repeat after a lost
    # reply answers with the row this execution completed (desk/ledger_run.py).
    done = await ex.fenced(
        lambda: ledger_run.complete(
            ex.rt.pg,
            ex.task_id,
            ex.execution_id,
            now=ex.rt.clock(),
            summary="Done.",
            summary_key="noop.done",
        )
    )
    if done is None:
        raise LostFence()
