"""Ticket imports ("sync"): an admin's CSV applied to a team in a mode (create / upsert).

The upload is stored in PostgreSQL; the task carries `{upload_id, mode}`. Rows are keyed by
(team, external_id); a batch of rows, its rejections and the task's progress commit together
under the execution fence, so a rescued run resumes after the last committed row and neither
duplicates nor skips. Parsing and validation live here; the worker only drives batches.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk import access, exports, inputs, ledger
from desk.db import retry_transient
from desk.errors import NotFound, TaskConflict, ValidationProblem
from desk.messages import Message, message
from desk.models import BackgroundTask, Priority, Role, TaskKind, TicketStatus, Upload
from desk.runtime import Runtime
from desk.tasks import accept, kick, replay, request_fingerprint

MODES = ("create", "upsert")
SCOPE = "import"
# What desk.exports guards with a leading ' (the formula characters, and ' itself).
GUARDED_START = ("=", "+", "-", "@", "\t", "\r", "'")


def sniff(data: bytes, limit: int) -> list[str]:
    """Check the whole file before anything is applied, so an import never stops half-way on a
    bad byte: too big, empty, a NUL anywhere (binary, and PostgreSQL text cannot hold it), not a
    ticket CSV, or a column named twice. Returns the header's columns. Other bad characters
    (invalid UTF-8, control characters) reject only their rows, in the report."""
    if len(data) > limit:
        raise ValidationProblem(
            "file", f"the file is {len(data) / 2**20:.1f} MB; the limit is {limit / 2**20:.0f} MB"
        )
    if not data.strip():
        raise ValidationProblem("file", "the file is empty")
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise ValidationProblem(
            "file", f"this is not a CSV file (it contains binary data: a NUL byte on line {line:,})"
        )
    first = data[:65536].decode("utf-8-sig", errors="replace").splitlines()[0]
    header = [h.strip().lower() for h in next(csv.reader([first]))]
    if "title" not in header or not ({"external_id", "id"} & set(header)):
        raise ValidationProblem(
            "file",
            "not a ticket CSV: the first row must name the columns, with title and external_id (or id)",
        )
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise ValidationProblem(
            "file", f"the header names the column {twice[0]!r} more than once; keep one"
        )
    return header


@dataclass(frozen=True)
class Row:
    number: int  # the spreadsheet row: the header is row 1
    external_id: str
    title: str
    status: str
    priority: str
    assignee_email: str
    creator_email: str
    created_at: datetime | None


@dataclass(frozen=True)
class Rejection:
    number: int
    column: str
    reason: str


def _undo_guard(value: str) -> str:
    """The exact inverse of desk.exports' guard: it prefixes ' to a cell starting with a formula
    character or with ', so a leading ' followed by one of those is the guard."""
    if len(value) > 1 and value[0] == "'" and value[1] in GUARDED_START:
        return value[1:]
    return value


def _as_is(value: str) -> str:
    return value


def from_export(header: list[str]) -> bool:
    """A file with exactly the export's columns came from taskdesk's export, whose cells carry
    the guard; in any other file a leading ' is the person's own and is kept."""
    return header == list(exports.COLUMNS)


_STATUSES = frozenset(m.value for m in TicketStatus)
_PRIORITIES = frozenset(m.value for m in Priority)


def _enum(value: str, allowed: frozenset[str], default: str) -> str | None:
    value = value.strip().upper() or default
    return value if value in allowed else None


def _parse_time(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def _not_utf8(value: str) -> bool:
    """True for text decoded with surrogateescape from bytes that were not UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _bad_cell(number: int, cells: dict[str, str]) -> Rejection | None:
    for column, value in cells.items():
        if _not_utf8(value):
            return Rejection(number, column, "not valid UTF-8 text (save the file as UTF-8)")
        problem = inputs.problem_in(value)
        if problem is not None:
            return Rejection(number, column, problem)
    return None


def _row(
    number: int,
    cells: dict[str, str],
    seen: dict[str, int],
    clean: bool,
    unguard: Callable[[str], str] = _undo_guard,
) -> Row | Rejection:
    if not clean:  # only a file with bad bytes or characters somewhere pays for this check
        bad = _bad_cell(number, cells)
        if bad is not None:
            return bad
    ext = (cells.get("external_id") or cells.get("id") or "").strip()
    if not ext:
        return Rejection(number, "external_id", "missing (and no id to use instead)")
    if len(ext) > 200:
        return Rejection(number, "external_id", "longer than 200 characters")
    if ext in seen:
        return Rejection(number, "external_id", f"duplicate of row {seen[ext]}")
    title = " ".join(unguard(cells.get("title") or "").split())
    if not title:
        return Rejection(number, "title", "missing")
    if len(title) > 500:
        return Rejection(number, "title", "longer than 500 characters")
    status = _enum(cells.get("status") or "", _STATUSES, "OPEN")
    if status is None:
        return Rejection(number, "status", f"unknown status {cells.get('status')!r}")
    priority = _enum(cells.get("priority") or "", _PRIORITIES, "NORMAL")
    if priority is None:
        return Rejection(number, "priority", f"unknown priority {cells.get('priority')!r}")
    seen[ext] = number
    return Row(
        number, ext, title, status, priority,
        unguard(cells.get("assignee_email") or "").strip().lower(),
        unguard(cells.get("creator_email") or "").strip().lower(),
        _parse_time(cells.get("created_at") or ""),
    )  # fmt: skip


def _text(data: bytes) -> tuple[str, bool]:
    """The file as text, and whether all of it is valid UTF-8 without control characters."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("utf-8-sig", errors="surrogateescape"), False
    return text, inputs.problem_in(text) is None


def _records(text: str) -> Iterator[list[str] | csv.Error]:
    """Non-blank records after the header; a malformed one comes as its csv.Error."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    next(reader, None)
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield exc
            continue
        if any(c.strip() for c in cells):
            yield cells


def parse(data: bytes) -> Iterator[Row | Rejection]:
    """Every data row of the file, valid or rejected, in order (malformed rows do not stop it).

    Row numbers count the header as row 1; a blank line is skipped but still counted."""
    text, clean = _text(data)
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header = [h.strip().lower() for h in next(reader, [])]
    unguard = _undo_guard if from_export(header) else _as_is
    seen: dict[str, int] = {}
    number = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            number += 1
            yield Rejection(number, "-", f"malformed CSV: {exc}")
            continue
        number += 1
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            yield Rejection(number, "-", f"expected {len(header)} columns, found {len(cells)}")
            continue
        yield _row(number, dict(zip(header, cells, strict=True)), seen, clean, unguard)


def count_rows(data: bytes) -> int:
    """How many items `parse` yields, without validating them (for the progress total)."""
    return sum(1 for _ in _records(_text(data)[0]))


# --- accepting -------------------------------------------------------------------------------


async def _admin(conn: AsyncConnection, user_id: int, team_id: int) -> access.Member:
    member = await access.require_member(conn, user_id, team_id)
    access.require_admin(member)
    return member


async def _insert_upload(
    conn: AsyncConnection, rt: Runtime, user_id: int, team_id: int, filename: str, data: bytes
) -> Upload:
    sniff(data, rt.settings.import_max_bytes)
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
    rt: Runtime, user_id: int, team_id: int, filename: str, data: bytes
) -> Upload:
    """Admins only. Checks size and that it looks like a ticket CSV, then keeps it (for clients
    that upload first and start later, like GraphQL's `startImport(uploadId)`)."""
    async with rt.engine.begin() as conn:
        await _admin(conn, user_id, team_id)
        return await _insert_upload(conn, rt, user_id, team_id, filename, data)


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
        upload = await _insert_upload(conn, rt, user_id, team_id, filename, data)
        assert upload.id is not None
        task = await _accept_import(
            rt, conn, user_id, team_id, upload.id, upload.filename, mode,
            idempotency_key, fingerprint,
        )  # fmt: skip
    await kick(rt, task)
    return task


# --- applying (the worker) -------------------------------------------------------------------


@dataclass
class Counts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    rejected: int = 0

    @classmethod
    def of(cls, stats: dict[str, Any]) -> Counts:
        return cls(*(int(stats.get(k, 0)) for k in ("created", "updated", "unchanged", "rejected")))

    def as_dict(self) -> dict[str, int]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "rejected": self.rejected,
        }

    def summary(self) -> Message:
        return message("import.done", **self.as_dict())


async def load_upload(conn: AsyncConnection, upload_id: int) -> bytes | None:
    row = (
        await conn.execute(sa.text("SELECT data FROM upload WHERE id = :id"), {"id": upload_id})
    ).first()
    return bytes(row.data) if row else None


async def team_people(conn: AsyncConnection, team_id: int) -> tuple[dict[str, int], dict[str, int]]:
    """(staff emails → id, member emails → id) for resolving assignees and creators."""
    rows = await conn.execute(
        sa.text(
            "SELECT lower(u.email) AS email, u.id, m.role FROM membership m JOIN app_user u ON u.id = m.user_id "
            "WHERE m.team_id = :t"
        ),
        {"t": team_id},
    )
    members, staff = {}, {}
    for r in rows:
        members[r.email] = r.id
        if r.role in (Role.ADMIN, Role.STAFF):
            staff[r.email] = r.id
    return staff, members


_UPSERT = (
    "INSERT INTO ticket (team_id, external_id, title, status, priority, assignee_id, creator_id, created_at, updated_at) "
    "SELECT :team, e, t, s, p, a, c, coalesce(ca, :now), :now FROM unnest("
    " CAST(:ext AS text[]), CAST(:title AS text[]), CAST(:status AS text[]), CAST(:prio AS text[]),"
    " CAST(:assignee AS int[]), CAST(:creator AS int[]), CAST(:created AS timestamptz[])) AS r(e, t, s, p, a, c, ca) "
    "ON CONFLICT (team_id, external_id) "
)
_CREATE_ONLY = _UPSERT + "DO NOTHING RETURNING true AS inserted"
_CREATE_OR_UPDATE = _UPSERT + (
    "DO UPDATE SET title = excluded.title, status = excluded.status, priority = excluded.priority, "
    " assignee_id = excluded.assignee_id, updated_at = excluded.updated_at "
    "WHERE (ticket.title, ticket.status, ticket.priority, ticket.assignee_id) IS DISTINCT FROM "
    " (excluded.title, excluded.status, excluded.priority, excluded.assignee_id) "
    "RETURNING (xmax = 0) AS inserted"
)


async def apply_batch(
    conn: AsyncConnection,
    task: BackgroundTask,
    items: list[Row | Rejection],
    people: tuple[dict[str, int], dict[str, int]],
    *,
    now: datetime,
) -> Counts:
    """Write one batch (tickets and rejections) inside the caller's fenced transaction."""
    staff, members = people
    rows: list[Row] = []
    rejections = [i for i in items if isinstance(i, Rejection)]
    for item in items:
        if isinstance(item, Row):
            if item.assignee_email and item.assignee_email not in staff:
                rejections.append(
                    Rejection(
                        item.number, "assignee_email", f"unknown assignee {item.assignee_email}"
                    )
                )
            else:
                rows.append(item)
    counts = Counts(rejected=len(rejections))
    if rejections:
        await conn.execute(
            sa.text(
                "INSERT INTO import_rejection (task_id, row_number, column_name, reason) "
                "SELECT :task, n, c, r FROM unnest(CAST(:n AS int[]), CAST(:c AS text[]), CAST(:r AS text[])) AS x(n, c, r) "
                "ON CONFLICT DO NOTHING"
            ),
            {"task": task.id, "n": [j.number for j in rejections], "c": [j.column for j in rejections],
             "r": [j.reason[:500] for j in rejections]},
        )  # fmt: skip
    if rows:
        sql = _CREATE_OR_UPDATE if task.filters.get("mode") == "upsert" else _CREATE_ONLY
        result = await conn.execute(
            sa.text(sql),
            {
                "team": task.team_id, "now": now, "ext": [r.external_id for r in rows],
                "title": [r.title for r in rows], "status": [r.status for r in rows],
                "prio": [r.priority for r in rows],
                "assignee": [staff.get(r.assignee_email) if r.assignee_email else None for r in rows],
                "creator": [members.get(r.creator_email, task.owner_id) for r in rows],
                "created": [r.created_at for r in rows],
            },
        )  # fmt: skip
        inserted = [bool(x.inserted) for x in result]
        counts.created = sum(inserted)
        counts.updated = len(inserted) - counts.created
        counts.unchanged = len(rows) - len(inserted)
    return counts


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
