"""MAIL_FETCH and MAIL_PARSE: one mailbox's fetch and its parse (docs/architecture.md,
"Mail in").

A fetch commits each batch of raw messages with the new watermark and its own progress in one
transaction fenced by its execution id: an execution that lost its fence rolls the batch back
(the owner stores it), so a rescued fetch starts again after the last committed batch. It ends
in the transaction that queues the mailbox's parse (when unparsed messages exist) and its next
fetch one cadence later, so a mailbox is always either being fetched or due to be.

The parse is one task per mailbox, not one per message: the scope index keeps one active
MAIL_PARSE per mailbox, so a mailbox's messages are read in the order they arrived (a reply
after the message it answers) and a burst of 10,000 messages is one ledger row, not 10,000.
Each message's outcome commits with its own claim (desk/work/mail_parse.py), so a parse killed
midway leaves only unparsed rows behind for the next one.
"""

from __future__ import annotations

from desk.core.runtime import Runtime
from desk.ledger import run as ledger_run
from desk.work import fetch, mail_parse, mailboxes
from desk.work.mailboxes import Mailbox
from jobs.execution import Execution
from jobs.outcomes import Cancelled, LostFence, Permanent, RetryLater

PARSE_ROUND = 100  # messages a parse reads between progress writes


async def _mailbox(ex: Execution) -> Mailbox | None:
    async with ex.rt.engine.connect() as conn:
        return await mailboxes.get(conn, int(ex.row.filters.get("mailbox_id", 0)))


async def _end(ex: Execution, said: str, box: Mailbox | None, *, fetched: bool) -> None:
    rt = ex.rt
    async with rt.engine.begin() as conn:
        done = await ledger_run.complete(
            conn, ex.task_id, ex.execution_id, now=rt.clock(), summary=said
        )
        if done is not None and box is not None and fetched:
            fresh = await mailboxes.get(conn, box.id)
            if fresh is not None and await fetch.has_unparsed(conn, box.id):
                await mailboxes.queue(
                    conn, mailboxes.PARSE, fresh, run_at=rt.clock(), now=rt.clock()
                )
            if fresh is not None:
                await mailboxes.queue_next_fetch(conn, fresh, now=rt.clock())
    ex.finished(done)


async def process_fetch(ex: Execution) -> None:
    rt = ex.rt
    box = await _mailbox(ex)
    if box is None or not box.enabled:
        await _end(ex, "The mailbox is gone or switched off; nothing fetched.", None, fetched=False)
        return
    try:
        password = box.password(rt.settings)
    except ValueError as exc:
        raise Permanent(str(exc)) from None
    stored = 0

    async def commit(validity: int, batch: list[fetch.Fetched]) -> None:
        nonlocal stored
        async with rt.engine.begin() as conn:
            stored += await fetch.store_batch(conn, box, validity, batch, now=rt.clock())
            pulse = await ledger_run.pulse(
                conn, ex.task_id, ex.execution_id, now=rt.clock(), lease=ex.lease, current=stored
            )
            if not pulse.alive:
                raise LostFence()  # rolls the batch back: the owning execution stores it
        if pulse.cancel_requested:
            raise Cancelled()

    try:
        await fetch.fetch_new(box, password, commit)
    except fetch.ImapProblem as exc:
        await mailboxes.note_error(rt.pg, box.id, str(exc)[:500], now=rt.clock())
        raise RetryLater(f"IMAP: {exc}"[:500]) from None
    await _end(ex, f"{stored} new messages stored.", box, fetched=True)


async def process_parse(ex: Execution) -> None:
    rt = ex.rt
    box = await _mailbox(ex)
    total = 0
    while box is not None:
        done = await mail_parse.parse_pending(rt, box, limit=PARSE_ROUND)
        total += len(done)
        await ex.progress(total)
        if not done:
            break
    await _end(ex, f"{total} messages read.", None, fetched=False)


async def fetch_now(rt: Runtime, box: Mailbox) -> int | None:
    """Queue the mailbox's fetch due now (None: one is already active)."""
    async with rt.engine.begin() as conn:
        return await mailboxes.queue(conn, mailboxes.FETCH, box, run_at=rt.clock(), now=rt.clock())
