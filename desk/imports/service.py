"""Ticket imports ("sync"): an admin's CSV applied to a team in a mode (create / upsert).

The upload is stored in PostgreSQL; the task carries `{upload_id, mode}`. Rows are keyed by
(team, external_id); a batch of rows, its rejections and the task's progress commit together
under the execution fence, so a rescued run resumes after the last committed row and neither
duplicates nor skips. This module accepts imports and serves the report of rejected rows;
reading the file is desk.imports.reader, writing batches desk.imports.apply, the worker drives them.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import AsyncIterator

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import inputs
from desk.core.db import retry_transient
from desk.core.errors import NotFound, TaskConflict, ValidationProblem
from desk.core.models import BackgroundTask, TaskKind, Upload
from desk.core.runtime import Runtime
from desk.imports.reader import sniff as sniff  # (re-exported: the import page checks a file first)
from desk.ledger import accept as ledger
from desk.people import access
from desk.work.tasks import accept, kick, replay, request_fingerprint

MODES = ("create", "upsert")
SCOPE = "import"

# --- accepting -------------------------------------------------------------------------------


async def _admin(conn: AsyncConnection, user_id: int, team_id: int) -> access.Member:
    member = await access.require_member(conn, user_id, team_id)
    access.require_admin(member)
    return member


async def _insert_upload(
    conn: AsyncConnection, rt: Runtime, user_id: int, team_id: int, filename: str, data: bytes,
    header: bool = True,
) -> Upload:  # fmt: skip
    sniff(data, rt.settings.import_max_bytes, columns=header)
    row = (
        await conn.execute(
            sa.text(
                "INSERT INTO upload (team_id, owner_id, filename, size, data, created_at) "
                "VALUES (:t, :u, :f, :s, :d, :now) RETURNING id, team_id, owner_id, filename, size, created_at"
            ),
            {
                "t": team_id,
                "u": user_id,
                "f": inputs.label(filename or "", max_len=300, default="upload.csv"),
                "s": len(data),
                "d": data,
                "now": rt.clock(),
            },
        )
    ).one()
    return Upload(**row._mapping, data=b"")


def _mode(mode: str) -> str:
    mode = (mode or "").strip().lower()
    if mode not in MODES:
        raise ValidationProblem(
            "mode", "use create (add new tickets only) or upsert (also update existing ones)"
        )
    return mode


async def _accept_import(
    rt: Runtime,
    conn: AsyncConnection,
    user_id: int,
    team_id: int,
    upload_id: int,
    filename: str,
    mode: str,
    idempotency_key: str | None = None,
    fingerprint: str | None = None,
) -> BackgroundTask:
    return await accept(
        rt,
        conn,
        ledger.NewTask(
            kind=TaskKind.IMPORT, team_id=team_id, owner_id=user_id, scope_key=SCOPE, run_at=rt.clock(),
            max_attempts=rt.settings.max_attempts,
            filters={"upload_id": upload_id, "mode": mode, "filename": filename},
            idempotency_key=idempotency_key, request_fingerprint=fingerprint,
        ),
    )  # fmt: skip


@retry_transient
async def store_upload(
    rt: Runtime, user_id: int, team_id: int, filename: str, data: bytes, *, header: bool = True
) -> Upload:
    """Admins only. Checks size and that it looks like a ticket CSV, then keeps it (for clients
    that upload first and start later, like GraphQL's `startImport(uploadId)`)."""
    async with rt.engine.begin() as conn:
        await _admin(conn, user_id, team_id)
        return await _insert_upload(conn, rt, user_id, team_id, filename, data, header)


@retry_transient
async def start_import(
    rt: Runtime, user_id: int, team_id: int, upload_id: int, mode: str
) -> BackgroundTask:
    """Admins only; one import per team at a time (a second one gets TaskConflict)."""
    mode = _mode(mode)
    async with rt.engine.begin() as conn:
        await ledger.lock_team(conn, team_id)
        await _admin(conn, user_id, team_id)
        upload = (
            await conn.execute(
                sa.text(
                    "SELECT id, filename FROM upload WHERE id = :id AND team_id = :t AND owner_id = :u"
                ),
                {"id": upload_id, "t": team_id, "u": user_id},
            )
        ).first()
        if upload is None:
            raise NotFound("Upload not found.")
        task = await _accept_import(rt, conn, user_id, team_id, upload.id, upload.filename, mode)
    await kick(rt, task)
    return task


@retry_transient
async def submit_import(
    rt: Runtime,
    user_id: int,
    team_id: int,
    filename: str,
    data: bytes,
    mode: str,
    *,
    idempotency_key: str | None = None,
    header: bool = True,
) -> BackgroundTask:
    """Store the file and start its import in one transaction: a conflict or a bad file keeps
    nothing (the page and the CLI). A known `idempotency_key` (the same file, mode and team)
    gets its first request's import back, even a finished one, and stores nothing."""
    mode = _mode(mode)
    fingerprint = request_fingerprint(
        TaskKind.IMPORT, team_id, mode, hashlib.sha256(data).hexdigest()
    )
    async with rt.engine.begin() as conn:
        replayed = await replay(rt, conn, user_id, idempotency_key, fingerprint)
        if replayed is not None:
            return replayed
        await ledger.lock_team(conn, team_id)
        await _admin(conn, user_id, team_id)
        existing = await ledger.active_in_scope(conn, TaskKind.IMPORT, team_id, SCOPE)
        if existing is not None:
            raise TaskConflict(existing)
        upload = await _insert_upload(conn, rt, user_id, team_id, filename, data, header)
        assert upload.id is not None
        task = await _accept_import(
            rt, conn, user_id, team_id, upload.id, upload.filename, mode,
            idempotency_key, fingerprint,
        )  # fmt: skip
    await kick(rt, task)
    return task


# --- the error report --------------------------------------------------------------------------


async def open_report(rt: Runtime, user_id: int, task_id: int) -> AsyncIterator[bytes]:
    """The rejected rows as CSV (row, column, reason), for whoever may see the import."""
    async with rt.engine.connect() as conn:
        task = await ledger.get(conn, task_id)
        member = await access.membership(conn, user_id, task.team_id) if task else None
        if (
            task is None
            or task.kind != TaskKind.IMPORT
            or member is None
            or not access.can_see_task(member, task.kind, task.owner_id)
        ):
            raise NotFound("Import not found.")
    return _report(rt, task_id)


async def _report(rt: Runtime, task_id: int) -> AsyncIterator[bytes]:
    yield b"\xef\xbb\xbfrow,column,reason\n"
    async with rt.engine.connect() as conn:
        result = await conn.stream(
            sa.text(
                "SELECT row_number, column_name, reason FROM import_rejection WHERE task_id = :t ORDER BY row_number"
            ),
            {"t": task_id},
        )
        async for r in result:
            buf = io.StringIO()
            csv.writer(buf, lineterminator="\n").writerow([r.row_number, r.column_name, r.reason])
            yield buf.getvalue().encode()
