"""What people (through GraphQL, the pages or the CLI) do with tasks: start, follow, cancel, retry.

Every function checks membership from the database, applies the visibility rules
(docs/architecture.md, "Visibility": a task you may not see is reported exactly as a missing
one), changes the ledger through `desk.ledger` in one transaction, and after commit
hands the task to the queue (best effort: if Redis is down the dispatcher sends it later).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg import AsyncConnection as PgConnection
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import tracing
from desk.core.db import retry_transient
from desk.core.errors import (
    NotFound,
    TaskConflict,
    ValidationProblem,
)
from desk.core.models import BackgroundTask, TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.helpdesk.filters import parse_filter
from desk.ledger import accept as ledger
from desk.ledger import intake
from desk.ledger import upkeep as ledger_upkeep
from desk.ledger.delivery import send_now
from desk.ledger.rules import can_retry, export_downloadable, status_label
from desk.people import access


async def kick(rt: Runtime, task: BackgroundTask) -> None:
    """After commit: hand the task to arq now (deferred when it is due later)."""
    await send_now(rt, task)


def _dispatch_now(rt: Runtime, run_at: datetime) -> bool:
    return run_at <= rt.clock() + timedelta(seconds=rt.settings.dispatch_lookahead_seconds)


def request_fingerprint(*parts: object) -> str:
    """What a request asked for, hashed: the same key must come with the same request."""
    raw = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


async def replay(
    rt: Runtime, conn: AsyncConnection, owner_id: int, key: str | None, fingerprint: str
) -> BackgroundTask | None:
    """The task `key` already made within the window, or None: go on (no key: None). Holds the
    key's lock until the caller's transaction ends (desk.ledger.intake.replay)."""
    if key is None:
        return None
    window = rt.settings.idempotency_window_seconds
    return await intake.replay(conn, owner_id, key, fingerprint, now=rt.clock(), window=window)


@tracing.traced("taskdesk.accept")
async def accept(rt: Runtime, conn: AsyncConnection, new: ledger.NewTask) -> BackgroundTask:
    """Insert WAITING unless an active task holds the same scope (then TaskConflict), by the
    accept statement every kind uses (desk.ledger.intake.accept), with no quota.

    Callers hold the lock of the scope (the team's for an import, the ticket's row for a
    reminder), so the unique index only ever catches a task that became active by another path
    (a user's retry); if that one finished again meanwhile, insert anew."""
    now = rt.clock()
    quota = intake.Quota.none(now)
    dispatched = _dispatch_now(rt, new.run_at)
    for _ in range(3):
        got = await intake.accept(conn, new, quota, now=now, dispatched=dispatched)
        if task := await _settle(conn, got, quota, now, None):
            return task
    raise RuntimeError("could not insert the task: its scope kept changing")  # pragma: no cover


# --- exports --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportRequest:
    """An export as the accept statement takes it: the new task, its owner's quota and the
    named assignee the filters need to be staff (None: no assignee named)."""

    new: ledger.NewTask
    quota: intake.Quota
    assignee: int | None


def export_request(
    rt: Runtime,
    user_id: int,
    team_id: int,
    raw_filters: dict[str, Any] | None,
    *,
    idempotency_key: str | None = None,
    now: datetime | None = None,
) -> ExportRequest:
    """Validate `raw_filters` (ValidationProblem) and make the export's task, scope and quota:
    one shape for an export a person starts and one a schedule starts (desk.work.schedule_runs)."""
    f = parse_filter(raw_filters)
    now = now or rt.clock()
    s = rt.settings
    scope = f"export:{user_id}:{f.fingerprint()}"
    fingerprint = request_fingerprint(TaskKind.EXPORT, team_id, scope)
    new = ledger.NewTask(
        kind=TaskKind.EXPORT,
        team_id=team_id,
        owner_id=user_id,
        scope_key=scope,
        run_at=now,
        max_attempts=s.max_attempts,
        filters=f.as_dict(),
        idempotency_key=idempotency_key,
        request_fingerprint=fingerprint,
    )
    quota = intake.Quota(
        s.export_max_active_per_user, s.export_max_per_hour, now - timedelta(hours=1)
    )
    assignee = (f.assignee_id or 0) if f.assignment == "user" else None
    return ExportRequest(new, quota, assignee)


@retry_transient
async def create_export(
    rt: Runtime,
    user_id: int,
    team_id: int,
    raw_filters: dict[str, Any] | None,
    *,
    idempotency_key: str | None = None,
    session: str | None = None,
) -> BackgroundTask:
    """Queue an export of the team's tickets matching `raw_filters` (a customer: only their own).

    With an `idempotency_key` seen within the window: that request's task, even finished.
    Locks only this person's accepts in this team (desk.ledger.intake), so colleagues never wait.
    `session`: the caller's session digest, checked by the accept itself (Unauthenticated when
    it ended), for a caller named without reading it (web.auth)."""
    req = export_request(rt, user_id, team_id, raw_filters, idempotency_key=idempotency_key)
    async with rt.pg.connection() as conn:
        task, fresh = await _accept_export(rt, conn, req, session)
    if fresh:  # after COMMIT: one Redis round trip (desk.core.queue's Lua send)
        await kick(rt, task)
    return task


async def accept_export_in(
    rt: Runtime,
    conn: PgConnection | AsyncConnection,
    req: ExportRequest,
    *,
    now: datetime | None = None,
    session: str | None = None,
) -> BackgroundTask:
    """The export accepted in the caller's open transaction (a schedule's occurrence commits
    with it): the owner's lock, then the accept statement every export uses. Raises what
    create_export raises (NotFound, TaskConflict, QuotaExceeded, ValidationProblem); the caller
    sends the task after its commit (`kick`)."""
    now = now or rt.clock()
    await intake.lock_person(conn, req.new.team_id, req.new.owner_id)
    for _ in range(3):
        got = await intake.accept(
            conn, req.new, req.quota, now=now, dispatched=_dispatch_now(rt, req.new.run_at),
            assignee_id=req.assignee, session=session,
        )  # fmt: skip
        if task := await _settle(conn, got, req.quota, now, req.assignee):
            return task
    raise RuntimeError("could not insert the task: its scope kept changing")  # pragma: no cover


@tracing.traced("taskdesk.accept")
async def _accept_export(
    rt: Runtime, conn: PgConnection, req: ExportRequest, session: str | None
) -> tuple[BackgroundTask, bool]:
    """This person's lock and the accept statement in one transaction, one round trip
    (desk.ledger.intake.accept_at_once); its findings become the same answers as ever, in order."""
    new, quota, assignee = req.new, req.quota, req.assignee
    if new.idempotency_key is not None:
        return await _accept_with_key(rt, conn, req, session)
    now = rt.clock()
    dispatched = _dispatch_now(rt, new.run_at)
    for _ in range(3):
        got = await intake.accept_at_once(
            conn, new, quota, now=now, dispatched=dispatched, assignee_id=assignee,
            session=session,
        )  # fmt: skip
        # A conflict is read after COMMIT: the task that held the scope when the statement ran.
        if task := await _settle(conn, got, quota, now, assignee):
            return task, True
    raise RuntimeError("could not insert the task: its scope kept changing")  # pragma: no cover


async def _settle(
    conn: PgConnection | AsyncConnection,
    got: intake.Outcome,
    quota: intake.Quota,
    now: datetime,
    assignee: int | None,
) -> BackgroundTask | None:
    """The accept's findings as the same answers as ever, in order: the new task, or the
    refusal raised; None: nothing held the scope when the statement looked, yet the unique
    index refused (a task became active by another path, a retry, meanwhile): look again."""
    if got.task is not None:
        return got.task
    intake.refuse(got, quota, now, assignee)
    existing = await ledger.get(conn, got.conflict_id) if got.conflict_id else None
    if existing is not None:
        raise TaskConflict(existing)
    return None


async def _accept_with_key(
    rt: Runtime, conn: PgConnection, req: ExportRequest, session: str | None
) -> tuple[BackgroundTask, bool]:
    """One transaction: the key's lock and earlier task (a replay), else `_accept_export`'s."""
    now = rt.clock()
    new = req.new
    key = new.idempotency_key or ""
    # No psycopg pipeline: waiting on the lock in pipeline mode spins the event loop (profiled).
    async with intake.transaction(conn):
        await intake.live_session(conn, session, new.owner_id, now)  # before a replay shows it
        window = rt.settings.idempotency_window_seconds
        replayed = await intake.replay(
            conn, new.owner_id, key, new.request_fingerprint or "", now=now, window=window
        )
        if replayed is not None:
            return replayed, False
        return await accept_export_in(rt, conn, req, session=session), True


# --- reading --------------------------------------------------------------------------------


async def _visible(
    conn: AsyncConnection, user_id: int, task_id: int, *, lock: bool = False
) -> tuple[BackgroundTask, access.Member]:
    task = await ledger.get(conn, task_id, lock=lock)
    if task is None:
        raise NotFound("Task not found.")
    member = await access.membership(conn, user_id, task.team_id)
    if member is None or not access.can_see_task(member, task.kind, task.owner_id):
        raise NotFound("Task not found.")
    return task, member


async def get_task(rt: Runtime, user_id: int, task_id: int) -> BackgroundTask:
    """One indexed read of the task plus one of the membership."""
    async with rt.engine.connect() as conn:
        task, _ = await _visible(conn, user_id, task_id)
        return task


# A team's tasks are listed by `desk.reads.tasks.list_tasks`: one read for every face.


# --- cancel and retry -----------------------------------------------------------------------


@retry_transient
async def cancel_task(rt: Runtime, user_id: int, task_id: int) -> BackgroundTask:
    """Cancel a task you may see (and, unless staff, that you own). Finished tasks stay as they are."""
    async with rt.engine.begin() as conn:
        task, member = await _visible(conn, user_id, task_id, lock=True)
        if task.owner_id != user_id and not member.is_staff:
            raise NotFound("Task not found.")
        if task.status not in (TaskStatus.WAITING, TaskStatus.RUNNING):
            return task
        changed = await ledger.cancel_task(conn, task, now=rt.clock())
    return changed or task


@retry_transient
async def retry_task(rt: Runtime, user_id: int, task_id: int) -> BackgroundTask:
    """FAILED → a fresh round (full attempts). Any other state: ValidationProblem."""
    async with rt.engine.begin() as conn:
        task, member = await _visible(conn, user_id, task_id, lock=True)
        if not can_retry(task):
            raise ValidationProblem(
                "id", f"only a failed task can be retried (this one is {task.status.lower()})"
            )
        try:
            changed = await ledger.retry(conn, task_id, now=rt.clock())
        except ledger.ScopeHeld:
            existing = await ledger.active_in_scope(conn, task.kind, task.team_id, task.scope_key)
            if existing is not None and not access.can_see_task(
                member, existing.kind, existing.owner_id
            ):
                # Someone else's task holds the scope (another admin's import, for one demoted
                # since): say it is busy, but never hand over a task `get_task` would hide.
                raise ValidationProblem(
                    "id", "a task of the same kind is already queued or running; retry it later"
                ) from None
            raise TaskConflict(existing) from None
    assert changed is not None
    await kick(rt, changed)
    return changed


# --- export results -------------------------------------------------------------------------


@dataclass
class ExportFile:
    filename: str
    size: int
    chunks: AsyncIterator[bytes]


async def open_export_result(rt: Runtime, user_id: int, task_id: int) -> ExportFile:
    """The stored CSV of a completed export, for its owner only and until it expires."""
    async with rt.engine.connect() as conn:
        task, _ = await _visible(conn, user_id, task_id)
    now = rt.clock()
    if not export_downloadable(task, user_id, now) or task.result_bytes is None:
        raise NotFound("Export file not found (it may have expired).")
    return ExportFile(
        filename=f"tickets-export-{task.id}-{task.finished_at or now:%Y%m%d-%H%M}.csv",
        size=task.result_bytes,
        chunks=_read_chunks(rt, task.id or 0, task.execution_id or ""),
    )


async def _read_chunks(rt: Runtime, task_id: int, execution_id: str) -> AsyncIterator[bytes]:
    async with rt.engine.connect() as conn:
        seq = -1
        while (
            chunk := await ledger_upkeep.next_chunk(conn, task_id, execution_id, seq)
        ) is not None:
            seq, data = chunk
            yield data


# --- internal kinds -------------------------------------------------------------------------


@tracing.traced("taskdesk.accept")
@retry_transient
async def submit_noop(
    rt: Runtime,
    user_id: int,
    team_id: int,
    script: dict[str, Any] | None = None,
    *,
    run_at: datetime | None = None,
) -> BackgroundTask:
    """A trivial task for benchmarks and tests (never offered to people); `script` steers it.
    One statement on `rt.pg` (membership and insert, desk.ledger.intake), then the kick."""
    run_at = run_at or rt.clock()
    new = ledger.NewTask(
        kind=TaskKind.NOOP,
        team_id=team_id,
        owner_id=user_id,
        scope_key=f"noop:{uuid.uuid4().hex}",
        run_at=run_at,
        max_attempts=int((script or {}).get("max_attempts", rt.settings.max_attempts)),
        filters=script or {},
    )
    now = rt.clock()
    task = await intake.accept_noop(rt.pg, new, now=now, dispatched=_dispatch_now(rt, run_at))
    if task is None:
        raise NotFound("Team not found.")  # as access.require_member says it
    await kick(rt, task)
    return task


__all__ = ["status_label"]  # re-exported: callers know it as desk.work.tasks.status_label
