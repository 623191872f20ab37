"""What a visible task offers and how it is called: cancel, retry, download, its status label.

One copy of each rule, read by `desk.work.tasks` (which enforces them) and by GraphQL and the pages
(which show buttons without trying the action). Each takes a `BackgroundTask` or anything with
the same columns (`desk.core.rows.TaskRow`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from desk.core.models import TaskKind, TaskStatus


class TaskLike(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def owner_id(self) -> int: ...
    @property
    def cancel_requested(self) -> bool: ...
    @property
    def result_bytes(self) -> int | None: ...
    @property
    def expires_at(self) -> datetime | None: ...
    @property
    def attempts(self) -> int: ...
    @property
    def run_at(self) -> datetime: ...
    @property
    def result_skipped(self) -> bool: ...
    @property
    def lease_until(self) -> datetime | None: ...


def can_cancel(task: TaskLike) -> bool:
    """Anyone who may see a task may cancel it (exports are their owner's, reminders and imports
    staff work); what remains is whether it is still active and not already stopping."""
    if task.status == TaskStatus.WAITING:
        return True
    return task.status == TaskStatus.RUNNING and not task.cancel_requested


def can_retry(task: TaskLike) -> bool:
    return task.status == TaskStatus.FAILED


def export_downloadable(task: TaskLike, user_id: int, now: datetime) -> bool:
    """The stored CSV is its owner's alone, and only until it expires."""
    return (
        task.kind == TaskKind.EXPORT
        and task.owner_id == user_id
        and task.status == TaskStatus.COMPLETED
        and task.result_bytes is not None
        and (task.expires_at is None or task.expires_at > now)
    )


def label_turns_at(task: TaskLike, now: datetime) -> datetime | None:
    """When `status_label` may next read otherwise by time alone (no write in between): a
    scheduled task turns Queued, a running one's lease runs out, a kept export expires. None:
    only a write changes it."""
    if task.status == TaskStatus.WAITING:
        turn = task.run_at - timedelta(seconds=5)
        return turn if task.attempts == 0 and turn > now else None
    if task.status == TaskStatus.RUNNING:
        lease = task.lease_until
        return lease if not task.cancel_requested and lease is not None and lease >= now else None
    if task.status == TaskStatus.COMPLETED and task.kind == TaskKind.EXPORT:
        expires = task.expires_at
        return (
            expires if not task.result_skipped and expires is not None and expires > now else None
        )
    return None


def status_label(task: TaskLike, now: datetime) -> str:
    """What people see: Queued, Scheduled, Retrying, Running, Worker lost, Cancelling, Completed,
    Skipped, Failed, Cancelled or Expired.

    "Worker lost": RUNNING, but its worker stopped renewing the lease (killed, or cut off). The
    rescuer re-arms it once a worker runs again, so it is not "Running" and not failed either."""
    if task.status == TaskStatus.WAITING:
        if task.attempts > 0:
            return "Retrying"
        return "Scheduled" if task.run_at > now + timedelta(seconds=5) else "Queued"
    if task.status == TaskStatus.RUNNING:
        if task.cancel_requested:
            return "Cancelling"
        lost = task.lease_until is not None and task.lease_until < now
        return "Worker lost" if lost else "Running"
    if task.status == TaskStatus.COMPLETED:
        if task.result_skipped:
            return "Skipped"
        if task.kind == TaskKind.EXPORT and task.expires_at is not None and task.expires_at <= now:
            return "Expired"
        return "Completed"
    return task.status.title()


# The REST contract's words for a task's state (api/v1): what a script branches on. GraphQL
# keeps its enum and `statusLabel`; these are coarser and stable.
CONTRACT_STATUSES = ("queued", "scheduled", "running", "succeeded", "failed", "cancelled")


def contract_status(task: TaskLike, now: datetime) -> str:
    """queued (a retry waiting out its backoff too), scheduled (a first run due later, as the
    label's "Scheduled"), running, succeeded (a skipped reminder too: it did what was asked),
    failed or cancelled."""
    if task.status == TaskStatus.WAITING:
        return "scheduled" if status_label(task, now) == "Scheduled" else "queued"
    if task.status == TaskStatus.COMPLETED:
        return "succeeded"
    return task.status.lower()


class MessageLike(TaskLike, Protocol):
    @property
    def progress_message(self) -> str: ...
    @property
    def last_error(self) -> str | None: ...
    @property
    def result_summary(self) -> str | None: ...


def contract_message(task: MessageLike) -> str:
    """One sentence on where the task is: its progress while it runs, the error a retry waits
    out or a failure ended with, the summary of a finished one."""
    if task.status == TaskStatus.RUNNING:
        return task.progress_message
    if task.status in (TaskStatus.WAITING, TaskStatus.FAILED) and task.last_error:
        return task.last_error
    return task.result_summary or ""
