"""NOOP: a trivial task for benchmarks and tests. Its filters script its behaviour:
`fail_times` (raise a retryable error on the first N attempts), `permanent` (fail at once),
`steps` and `step_seconds` (report progress N times, pausing between), `hang` (never return: a
processor stuck for good, stopped by its run-time limit) and `block_seconds` (block the event
loop, as CPU-bound or blocking code would: nothing in the worker runs meanwhile, the keep-alive
neither, so its lease runs out). Plain NOOPs (no script)
claimed together by a short-lane batch complete together: `complete_many`."""

from __future__ import annotations

import asyncio
import time

from desk.core.db import retrying
from desk.core.runtime import Runtime
from desk.ledger import run as ledger_run
from desk.ledger import upkeep as ledger_upkeep
from desk.ledger.run import Row
from jobs.execution import Execution
from jobs.outcomes import Permanent


class ScriptedFailure(RuntimeError):
    pass


async def complete_many(rt: Runtime, claimed: list[tuple[Row, str]]) -> set[int]:
    """Complete a batch of plain NOOPs (task, execution id) in one fenced statement; returns the
    ids this call completed (a row whose fence is gone is not touched)."""
    done = await retrying(
        lambda: ledger_upkeep.complete_many(
            rt.pg,
            [ledger_upkeep.Ending(t.id, eid, "Done.", False, "noop.done") for t, eid in claimed],
            now=rt.clock(),
        )
    )
    return {t.id for t in done}


async def process(ex: Execution) -> None:
    script = ex.row.filters or {}
    if script.get("permanent"):
        raise Permanent("Scripted permanent failure.")
    if ex.row.attempts <= int(script.get("fail_times", 0)):
        raise ScriptedFailure(f"scripted failure on attempt {ex.row.attempts}")
    if script.get("hang"):
        await asyncio.Event().wait()  # never set
    if float(script.get("block_seconds", 0)) > 0:
        # Blocking on purpose: the whole event loop stops, as CPU-bound code would stop it.
        time.sleep(float(script["block_seconds"]))  # noqa: ASYNC251
    steps = int(script.get("steps", 0))
    for i in range(steps):
        await asyncio.sleep(float(script.get("step_seconds", 0.05)))
        await ex.progress(current=i + 1, total=steps, message=f"step {i + 1} / {steps}")
    # One fenced autocommit statement, repeated on a transient error: a repeat after a lost
    # reply answers with the row this execution completed (desk/ledger/run.py).
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
    ex.finished(done)
