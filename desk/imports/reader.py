"""Reading an import file: the whole-file check (`sniff`) and every data row, valid or rejected
with its spreadsheet row number and reason (`parse`). Pure Python, no database: the worker runs
it in a thread, a batch ahead of the writes (desk.imports.batch prepares the rows there and
desk.imports.apply writes them).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.core.models import Priority, TicketStatus
from desk.work import exports

# What desk.work.exports guards with a leading ' (the formula characters, and ' itself).
GUARDED_START = ("=", "+", "-", "@", "\t", "\r", "'")


def sniff(data: bytes, limit: int, *, columns: bool = True) -> list[str]:
    """Check the whole file before anything is applied, so an import never stops half-way on a
    bad byte: too big, empty, a NUL anywhere (binary, and PostgreSQL text cannot hold it), not a
    ticket CSV, or a column named twice. Returns the header's columns. Other bad characters
    (invalid UTF-8, control characters) reject only their rows, in the report. Without
    `columns`, only the bytes are checked now: the import checks the header when it runs, and a
    bad one fails it with the same words (the REST API, whose document can say which bytes
    it takes but not which columns)."""
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
    if not columns:
        return []
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
    """The exact inverse of desk.work.exports' guard: it prefixes ' to a cell starting with a formula
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
    if not value:  # most files have no created_at: a raised ValueError per row costs more
        return None
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
        if "".join(cells).strip():  # (one C call: some cell is not blank)
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
        if not "".join(cells).strip():
            continue
        if len(cells) != len(header):
            yield Rejection(number, "-", f"expected {len(header)} columns, found {len(cells)}")
            continue
        yield _row(number, dict(zip(header, cells, strict=True)), seen, clean, unguard)


def count_rows(data: bytes) -> int:
    """How many items `parse` yields, without validating them (for the progress total)."""
    return sum(1 for _ in _records(_text(data)[0]))
