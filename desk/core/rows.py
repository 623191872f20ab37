"""The task row as it is read (docs/architecture.md, "Ledger"): `TaskRow`, the columns of the
`background_task` table (`models.BackgroundTask`) that a person is shown, named and typed as there.

It is the one read shape of a task: `desk.reads` answers with it, GraphQL's `Task` and the pages'
`TaskView` are built from it, the row cache keys on its fields, the watcher's label state is a
projection of it, and the worker's run row (`desk.ledger.run.Row`) extends it with the columns of
an execution. Checked against the table when imported: a field that is not a column fails loudly.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from desk.core.models import BackgroundTask


@dataclass(frozen=True, slots=True)
class TaskRow:
    """The ledger columns people see of a task."""

    id: int
    kind: str
    status: str
    progress: float
    progress_current: int
    progress_total: int | None
    progress_message: str
    attempts: int
    max_attempts: int
    last_error: str | None
    error_key: str | None
    error_params: dict[str, Any]
    note: str
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result_summary: str | None
    summary_key: str | None
    summary_params: dict[str, Any]
    result_skipped: bool
    result_bytes: int | None
    expires_at: datetime | None
    cancel_requested: bool
    lease_until: datetime | None
    # The latest hand-off to Redis (None: not sent, or handed back). A send moves only this, and
    # announces nothing (docs/architecture.md, "Change feed"), so a row remembered at its
    # version (desk/reads/recall.py) may hold an older value; the pages do not show it.
    dispatched_at: datetime | None
    filters: dict[str, Any]
    stats: dict[str, Any]
    team_id: int
    owner_id: int
    ticket_id: int | None
    updated_at: datetime  # a watched row's version (ui.watch.polling.row_version) is made of it


TASK_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(TaskRow))


def columns_of(row_type: type[Any]) -> tuple[str, ...]:
    """A row dataclass's fields, each checked to be a column of `background_task`."""
    names = tuple(f.name for f in fields(row_type))
    unknown = set(names) - set(BackgroundTask.__table__.columns.keys())  # type: ignore[attr-defined]
    if unknown:
        raise TypeError(f"{row_type.__name__}: not columns of background_task: {sorted(unknown)}")
    return names


columns_of(TaskRow)
