"""IMPORT: apply an uploaded CSV to a team in batches; each batch commits with its progress.

A rescued run starts after the last committed row (`progress_current`) with the counts saved in
`stats`, so every external id ends up exactly once and the counts add up. The file is read in a
thread one batch ahead: while PostgreSQL writes batch k, the next batch is parsed and prepared
(desk.imports.batch: its COPY text built as far as it goes without the database).
Batches are `IMPORT_BATCH_ROWS` rows (docs/architecture.md, "Import batches").
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from itertools import islice

from desk.core.errors import ValidationProblem
from desk.imports import apply as import_apply
from desk.imports import batch as import_batch
from desk.imports import reader as import_csv
from desk.ledger import run as ledger_run
from desk.people import access
from jobs.execution import Execution
from jobs.outcomes import Cancelled, LostFence, Permanent


async def _load(ex: Execution) -> bytes:
    task = ex.task
    async with ex.rt.engine.connect() as conn:
        member = await access.membership(conn, task.owner_id, task.team_id)
        if member is None or not member.is_admin:
            raise Permanent("The person who started this import is no longer an admin of the team.")
        data = await import_apply.load_upload(conn, int(task.filters.get("upload_id", 0)))
    if data is None:
        raise Permanent("The uploaded file is no longer stored; upload it again.")
    try:
        import_csv.sniff(data, ex.rt.settings.import_max_bytes)
    except ValidationProblem as exc:
        raise Permanent(exc.detail) from None
    return data


@dataclass(frozen=True)
class Batch:
    upto: int  # how many items of the file are done once this batch commits
    prepared: import_batch.Prepared


class Batches:
    """The file's items after the first `done`, as prepared batches of `size` (pure Python)."""

    def __init__(self, data: bytes, done: int, size: int, team_id: int) -> None:
        self._data, self._items = data, import_csv.parse(data)
        self._done, self._size, self._team, self.upto = done, size, team_id, 0
        self._ahead: asyncio.Future[Batch | None] | None = None
        self._count: asyncio.Future[int] | None = None

    def sent(self) -> None:
        """The server has the current batch's rows: parse the next batch in a thread (and count
        the file's rows, the first time). Not sooner: while a thread holds the GIL, each round
        trip of the event loop waits for it (docs/architecture.md, "Import batches")."""
        if self._ahead is None:
            self._ahead = asyncio.ensure_future(asyncio.to_thread(self.next))
        if self._count is None:
            self._count = asyncio.ensure_future(
                asyncio.to_thread(import_csv.count_rows, self._data)
            )

    async def take(self) -> Batch | None:
        if self._ahead is None:  # the first batch: nothing is being written meanwhile
            self._ahead = asyncio.ensure_future(asyncio.to_thread(self.next))
        ahead, self._ahead = self._ahead, None
        return await ahead

    async def total(self) -> int:
        """How many items the file has (import_csv.count_rows), for the progress."""
        self.sent()
        assert self._count is not None
        return await self._count

    async def settle(self) -> None:
        """Wait for the threads under way: none is left reading behind a failed run."""
        under_way = [f for f in (self._ahead, self._count) if f is not None]
        if under_way:
            await asyncio.wait(under_way)

    def next(self) -> Batch | None:
        if self._done:  # parsed again (duplicates are judged against earlier rows), not written
            self.upto = sum(1 for _ in islice(self._items, self._done))
            self._done = 0
        items = list(islice(self._items, self._size))
        if not items:
            return None
        self.upto += len(items)
        return Batch(self.upto, import_batch.prepare(items, self._team))


async def _commit(
    ex: Execution, batches: Batches, batch: Batch, counts: import_apply.Counts
) -> import_apply.Counts:
    rt, upto = ex.rt, batch.upto
    async with rt.engine.begin() as conn:
        fresh = counts.updated + counts.unchanged == 0  # no existing ticket met so far
        got = await import_apply.apply_batch(
            conn, ex.task, batch.prepared, now=rt.clock(), fresh=fresh, sent=batches.sent
        )
        new = import_apply.Counts(
            counts.created + got.created, counts.updated + got.updated,
            counts.unchanged + got.unchanged, counts.rejected + got.rejected,
        )  # fmt: skip
        total = await batches.total()  # counted while the server wrote the first batch
        ex.allow_rows(total)  # the run-time limit of this size (jobs/limits.py)
        pulse = await ledger_run.pulse(
            conn, ex.task_id, ex.execution_id, now=rt.clock(), lease=ex.lease,
            current=upto, total=total, message=f"{upto:,} / {total:,} rows", stats=new.as_dict(),
        )  # fmt: skip
        if not pulse.alive:
            raise LostFence()  # rolls the batch back: the owning execution writes these rows
    if pulse.cancel_requested:
        raise Cancelled()
    return new


async def process(ex: Execution) -> None:
    data = await _load(ex)
    done = ex.task.progress_current  # rows an earlier, rescued execution already committed
    counts = import_apply.Counts.of(ex.task.stats)
    await ex.progress(done)  # the total comes with the first batch (`Batches.sent`)
    batches = Batches(data, done, ex.rt.settings.import_batch_rows, ex.task.team_id)
    try:
        while (batch := await batches.take()) is not None:
            counts = await _commit(ex, batches, batch, counts)
        total = max(await batches.total(), batches.upto)
    except BaseException:
        await batches.settle()
        raise
    said = counts.summary()
    async with ex.rt.engine.begin() as conn:
        finished = await ledger_run.complete(
            conn, ex.task_id, ex.execution_id, now=ex.rt.clock(), summary=said.text,
            summary_key=said.key, summary_params=said.params,
            current=total, message=f"{total:,} / {total:,} rows", stats=counts.as_dict(),
        )  # fmt: skip
    ex.finished(finished)  # CANCELLED when a cancel came after the last batch: its rows stay
