"""How a task row reads: kind, what it covers, status label, progress, ETA, actions, polling.

An import's row also carries its file name, mode and counts, and offers the rejected-rows report
once it has ended with any.

Everything here is presentation over a task the desk returned (so already visible to the
viewer): a `desk.reads.tasks.TaskRow` or a `BackgroundTask`; the status words come from
`desk.ledger.rules.status_label`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from desk.core.errors import ValidationProblem
from desk.core.models import ACTIVE_STATUSES, BackgroundTask, TaskKind, TaskStatus
from desk.helpdesk import filters
from desk.ledger import lanes
from desk.ledger import rules as task_rules
from desk.reads.tasks import TaskRow
from ui.watch import polling

KIND_LABELS = {
    TaskKind.EXPORT: "Export",
    TaskKind.REMINDER: "Reminder",
    TaskKind.IMPORT: "Import",
    TaskKind.NOOP: "Test task",
    TaskKind.EMAIL: "E-mail",
    TaskKind.MAIL_FETCH: "Mailbox fetch",
    TaskKind.MAIL_PARSE: "Reading mail",
    TaskKind.SLA_TIMER: "SLA timer",
    TaskKind.TIME_RULE: "Time rules",
}
TONE = {
    "Queued": "wait",
    "Scheduled": "wait",
    "Retrying": "warn",
    "Running": "run",
    "Worker lost": "warn",
    "Cancelling": "warn",
    "Completed": "ok",
    "Skipped": "muted",
    "Failed": "bad",
    "Cancelled": "muted",
    "Expired": "muted",
}


@dataclass(frozen=True)
class ImportCounts:
    created: int
    updated: int
    unchanged: int
    rejected: int

    @classmethod
    def of(cls, stats: dict[str, object]) -> ImportCounts | None:
        """None until the worker has committed a first batch (no stats yet)."""
        if not stats:
            return None
        keys = ("created", "updated", "unchanged", "rejected")
        return cls(*(_count(stats.get(k)) for k in keys))


def _count(value: object) -> int:
    return value if isinstance(value, int) else int(str(value or 0))


Task = TaskRow | BackgroundTask


@dataclass
class TaskView:
    task: Task
    label: str
    kind: str
    covers: str
    covers_link: str | None
    since: float  # server time (epoch seconds) the viewer started watching this row
    poll_delay: int | None  # None: render no polling attributes
    stale: bool  # unfinished but watched for too long: offer "Refresh" instead
    progress_pct: int | None
    eta_seconds: int | None
    can_download: bool
    can_cancel: bool
    can_retry: bool
    mode: str | None = None  # an import's mode: "create" or "upsert"
    counts: ImportCounts | None = None  # an import's created/updated/unchanged/rejected so far
    can_report: bool = False  # a finished import with rejected rows: offer the report
    paused: bool = False  # WAITING in a lane an operator paused: accepted, not sent until resumed

    @property
    def id(self) -> int:
        return self.task.id or 0

    @property
    def active(self) -> bool:
        return self.task.status in ACTIVE_STATUSES

    @property
    def tone(self) -> str:
        return TONE.get(self.label, "muted")


# Every poll of an export's row describes its filters again; the words are a function of the
# filters alone, so they are worked out once per distinct filters (repr: JSON values, typed).
_DESCRIBED: dict[str, str] = {}
MAX_DESCRIBED = 4096


def describe_export(raw: dict[str, object]) -> str:
    key = repr(raw)
    text = _DESCRIBED.get(key)
    if text is None:
        try:
            text = filters.parse_filter(raw).describe()
        except ValidationProblem:
            text = "Tickets (filters no longer valid)"
        if len(_DESCRIBED) >= MAX_DESCRIBED:
            _DESCRIBED.clear()  # bounded; refilled by the rows still polled
        _DESCRIBED[key] = text
    return text


# An ETA from the first moments extrapolates start-up costs (parsing, counting) over the whole
# job: an import once said 26 min for 100 s of work. Wait until the rate means something.
ETA_MIN_FRACTION = 0.05
ETA_MIN_SECONDS = 5.0


def eta(task: Task, now: datetime) -> int | None:
    """Seconds left at the rate so far; only while running, ≥ 5 % done and ≥ 5 s in."""
    if task.status != TaskStatus.RUNNING or not task.progress_total or not task.started_at:
        return None
    done = task.progress_current
    elapsed = (now - task.started_at).total_seconds()
    if done >= task.progress_total or elapsed < ETA_MIN_SECONDS:
        return None
    if done < ETA_MIN_FRACTION * task.progress_total:
        return None
    return max(1, round((task.progress_total - done) * elapsed / done))


class Look(NamedTuple):
    """What time and the viewer add to a task's row; the rest of it is the task's own (ui.rowpiece
    keys on these)."""

    since: float  # when this viewer began watching it (epoch seconds)
    label: str
    poll_delay: int | None
    eta_seconds: int | None
    can_download: bool
    paused: bool


def look(
    task: Task,
    *,
    viewer_id: int,
    now: datetime,
    since: float | None = None,
    paused_lanes: frozenset[str] = frozenset(),
) -> Look:
    """The row's look for this viewer now, watched since `since` (None: from now on)."""
    stamp = now.timestamp()
    watch_from = stamp if since is None else min(since, stamp)
    active = task.status in ACTIVE_STATUSES
    return Look(
        watch_from,
        task_rules.status_label(task, now),
        polling.next_delay(stamp - watch_from) if active else None,
        eta(task, now),
        task_rules.export_downloadable(task, viewer_id, now),
        task.status == TaskStatus.WAITING and lanes.lane_of(task.kind) in paused_lanes,
    )


def build(
    task: Task,
    *,
    viewer_id: int,
    now: datetime,
    since: float | None = None,
    ticket_title: str | None = None,
    paused_lanes: frozenset[str] = frozenset(),
) -> TaskView:
    """A row watched since `since` (None: from now on)."""
    seen = look(task, viewer_id=viewer_id, now=now, since=since, paused_lanes=paused_lanes)
    return build_from(task, seen, ticket_title)


def build_from(task: Task, seen: Look, ticket_title: str | None = None) -> TaskView:
    """The row of `task` with its look worked out already (`look`)."""
    active = task.status in ACTIVE_STATUSES
    if task.kind == TaskKind.REMINDER:
        covers = f"#{task.ticket_id} {ticket_title or ''}".strip()
        link = f"/tickets/{task.ticket_id}"
    elif task.kind == TaskKind.EXPORT:
        covers, link = describe_export(task.filters), None
    elif task.kind == TaskKind.IMPORT:
        covers, link = str(task.filters.get("filename") or ""), None
    else:
        covers, link = "", None
    counts = ImportCounts.of(task.stats) if task.kind == TaskKind.IMPORT else None
    pct = None
    if task.status == TaskStatus.RUNNING:
        pct = round(100 * task.progress)
    return TaskView(
        task=task,
        label=seen.label,
        kind=KIND_LABELS.get(TaskKind(task.kind), task.kind.title()),
        covers=covers,
        covers_link=link,
        since=seen.since,
        poll_delay=seen.poll_delay,
        stale=active and seen.poll_delay is None,
        progress_pct=pct,
        eta_seconds=seen.eta_seconds,
        can_download=seen.can_download,
        can_cancel=task_rules.can_cancel(task),
        can_retry=task_rules.can_retry(task),
        mode=str(task.filters.get("mode") or "") if task.kind == TaskKind.IMPORT else None,
        counts=counts,
        # desk lets whoever sees an import read its report (`desk.imports.service.open_report`).
        can_report=not active and counts is not None and counts.rejected > 0,
        paused=seen.paused,
    )
