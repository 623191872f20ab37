"""What an export contains: the ticket query for a task's filters and the CSV it is written as.

The CSV is produced by PostgreSQL itself (`COPY (SELECT …) TO STDOUT CSV`): formula cells are
neutralised and times formatted in SQL, so the worker only moves bytes.
"""

from __future__ import annotations

import re
from typing import Any

from desk.filters import filter_sql, parse_filter
from desk.messages import Message, message
from desk.models import BackgroundTask

BOM = b"\xef\xbb\xbf"
COLUMNS = (
    "id",
    "title",
    "status",
    "priority",
    "assignee_email",
    "creator_email",
    "created_at",
    "updated_at",
)
HEADER = BOM + (",".join(COLUMNS) + "\n").encode()


def _safe(expr: str) -> str:
    """Spreadsheet formula injection: a cell starting with = + - @ tab or CR gets a leading '.
    A cell already starting with ' gets one too, so that desk.imports can undo the guard exactly:
    '=x reads back as =x, and ''=x as the title '=x it was."""
    return f"CASE WHEN left({expr}, 1) IN ('=', '+', '-', '@', E'\\t', E'\\r', '''') THEN '''' || {expr} ELSE {expr} END"


def _iso(expr: str) -> str:
    return f"""to_char({expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')"""


def _pyformat(sql: str) -> str:
    """`:name` placeholders (SQLAlchemy) → `%(name)s` (psycopg, for COPY)."""
    return re.sub(r"(?<![:\w]):([a-z_]+)", r"%(\1)s", sql)


def export_where(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    f = parse_filter(task.filters)
    return filter_sql(f, team_id=task.team_id, me=task.owner_id, creator_id=task.scope_creator_id)


def count_sql(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    where, params = export_where(task)
    return f"SELECT count(*) FROM ticket t WHERE {where}", params


def copy_sql(task: BackgroundTask) -> tuple[str, dict[str, Any]]:
    """A psycopg COPY statement (pyformat placeholders) writing the CSV body, no header."""
    where, params = export_where(task)
    select = (
        f"SELECT t.id, {_safe('t.title')}, t.status, t.priority, "
        f"{_safe('coalesce(a.email, %(empty)s)')}, {_safe('c.email')}, "
        f"{_iso('t.created_at')}, {_iso('t.updated_at')} "
        "FROM ticket t JOIN app_user c ON c.id = t.creator_id LEFT JOIN app_user a ON a.id = t.assignee_id "
        f"WHERE {_pyformat(where)} ORDER BY t.id"
    )
    return f"COPY ({select}) TO STDOUT (FORMAT csv)", params | {"empty": ""}


def summary(rows: int) -> Message:
    """ "17 rows exported." — with its key and figures, for the reader's language."""
    return message("export.done", rows=rows)
