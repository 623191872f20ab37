"""IMPORT: apply an uploaded CSV to a team in batches; each batch commits with its progress.

A rescued run starts after the last committed row (`progress_current`) with the counts saved in
`stats`, so every external id ends up exactly once and the counts add up.
"""

from __future__ import annotations

import asyncio

from desk import access, imports, ledger_run
from desk.errors import ValidationProblem
from jobs.execution import Execution
from jobs.outcomes import Cancelled, LostFence, Permanent


async def _load(ex: Execution) -> tuple[bytes, tuple[dict[str, int], dict[str, int]]]:
    task = ex.task
    async with ex.rt.engine.connect() as conn:
        member = await access.membership(conn, task.owner_id, task.team_id)
        if member is None or not member.is_admin:
            raise Permanent("The person who started this import is no longer an admin of the team.")
        data = await imports.load_upload(conn, int(task.filters.get("upload_id", 0)))
        people = await imports.team_people(conn, task.team_id)
    if data is None:
        raise Permanent("The uploaded file is no longer stored; upload it again.")
    try:
        imports.sniff(data, ex.rt.settings.import_max_bytes)
    except ValidationProblem as exc:
        raise Permanent(exc.detail) from None
    return data, people


async def _commit(
    ex: Execution,
    batch: list[imports.Row | imports.Rejection],
    upto: int,
    total: int,
    counts: imports.Counts,
    people: tuple[dict[str, int], dict[str, int]],
) -> imports.Counts:
    rt = ex.rt
    async with rt.engine.begin() as conn:
        got = await imports.apply_batch(conn, ex.task, batch, people, now=rt.clock())
        new = imports.Counts(
            counts.created + got.created, counts.updated + got.updated,
            counts.unchanged + got.unchanged, counts.rejected + got.rejected,
        )  # fmt: skip
        pulse = await ledger_run.progress(
            conn, ex.task_id, ex.execution_id, now=rt.clock(), lease=ex.lease,
            current=upto, total=total, message=f"{upto:,} / {total:,} rows", stats=new.as_dict(),
        )  # fmt: skip
        if not pulse.alive:
            raise LostFence()  # rolls the batch back: the owning execution writes these rows
    if pulse.cancel_requested:
        raise Cancelled()
    return new


async def process(ex: Execution) -> None:
    data, people = await _load(ex)
    total = await asyncio.to_thread(imports.count_rows, data)
    done = ex.task.progress_current  # rows an earlier, rescued execution already committed
    counts = imports.Counts.of(ex.task.stats)
    await ex.progress(done, total, f"{done:,} / {total:,} rows")
    size = ex.rt.settings.import_batch_rows
    batch: list[imports.Row | imports.Rejection] = []
    index = done
    for index, item in enumerate(imports.parse(data), start=1):
        if index <= done:
            continue
        batch.append(item)
        if len(batch) >= size:
            counts = await _commit(ex, batch, index, total, counts, people)
            batch = []
    if batch:
        counts = await _commit(ex, batch, index, total, counts, people)
    total = max(total, index)
    said = counts.summary()
    async with ex.rt.engine.begin() as conn:
        finished = await ledger_run.finish(
            conn, ex.task_id, ex.execution_id, now=ex.rt.clock(), summary=said.text,
            summary_key=said.key, summary_params=said.params,
            current=total, message=f"{total:,} / {total:,} rows", stats=counts.as_dict(),
        )  # fmt: skip
        if finished is None:
            raise LostFence()
