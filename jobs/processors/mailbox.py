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
from desk.work.imap import ImapProblem, Options
from desk.work.mailboxes import Mailbox
from jobs.execution import Execution
from jobs.outcomes import Cancelled, LostFence, Permanent, RetryLater

PARSE_ROUND = 100  # messages a parse reads between progress writes


async def _mailbox(ex: Execution) -> Mailbox | None:
    async with ex.rt.engine.connect() as conn:
        return await mailboxes.get(conn, int(ex.row.filters.get("mailbox_id", 0)))


async def _end(
    ex: Execution, said: str, box: Mailbox | None, *, fetched: bool, at_once: bool = False
) -> None:
    """Complete the task; a fetch queues its mailbox's parse (when unparsed mail exists) and its
    next fetch — at once after a fetch that waited in IDLE, else one cadence later. A parse
    queues another when mail came in while it finished (the mailbox row's lock orders this
    against a fetch's commit, so no stored message is left without a parse)."""
    rt = ex.rt
    async with rt.engine.begin() as conn:
        fresh = await mailboxes.get(conn, box.id, lock=True) if box is not None else None
        done = await ledger_run.complete(
            conn, ex.task_id, ex.execution_id, now=rt.clock(), summary=said
        )
        if done is not None and fresh is not None:
            now = rt.clock()
            if await fetch.has_unparsed(conn, fresh.id):
                await mailboxes.queue(conn, mailboxes.PARSE, fresh, run_at=now, now=now)
            if fetched and at_once and fresh.enabled:
                await mailboxes.queue(conn, mailboxes.FETCH, fresh, run_at=now, now=now)
            elif fetched:
                await mailboxes.queue_next_fetch(conn, fresh, now=now)
    ex.finished(done)


class _IdleSlots:
    """How many of this worker's fetches wait in IDLE (each holds a short-lane slot): at most
    MAIL_IDLE_MAX_PER_WORKER, and always fewer than the lane's slots."""

    busy = 0

    @classmethod
    def seconds(cls, ex: Execution) -> float:
        s = ex.rt.settings
        cap = min(s.mail_idle_max_per_worker, s.worker_max_jobs - 1)
        if s.mail_idle_seconds <= 0 or cls.busy >= cap:
            return 0.0
        return max(0.0, min(s.mail_idle_seconds, ex.limit - s.mail_imap_timeout_seconds - 1))


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
            new = await fetch.store_batch(conn, box, validity, batch, now=rt.clock())
            pulse = await ledger_run.pulse(
                conn, ex.task_id, ex.execution_id, now=rt.clock(), lease=ex.lease,
                current=stored + new,
            )  # fmt: skip
            if not pulse.alive:
                raise LostFence()  # rolls the batch back: the owning execution stores it
            if new:  # parsed now, not when the fetch ends (a fetch in IDLE runs for a while)
                now = rt.clock()
                await mailboxes.queue(conn, mailboxes.PARSE, box, run_at=now, now=now)
        stored += new
        if pulse.cancel_requested:
            raise Cancelled()

    idle = _IdleSlots.seconds(ex)
    _IdleSlots.busy += idle > 0
    try:
        done = await fetch.fetch_and_idle(
            box, password, commit, Options.of(rt.settings), idle_seconds=idle
        )
    except ImapProblem as exc:
        await mailboxes.note_error(rt.pg, box.id, str(exc)[:500])
        raise RetryLater(f"IMAP: {exc}"[:500]) from None
    finally:
        _IdleSlots.busy -= idle > 0
    await _end(ex, f"{stored} new messages stored.", box, fetched=True, at_once=done.idled)


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
    await _end(ex, f"{total} messages read.", box, fetched=False)


async def fetch_now(rt: Runtime, box: Mailbox) -> int | None:
    """Queue the mailbox's fetch due now (None: one is already active)."""
    async with rt.engine.begin() as conn:
        return await mailboxes.queue(conn, mailboxes.FETCH, box, run_at=rt.clock(), now=rt.clock())
