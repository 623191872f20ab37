"""How long one attempt of a task may run (docs/architecture.md, "Run-time limits").

The keep-alive renews a lease for as long as the worker process lives, so without a limit a
processor stuck on a socket or a bug would hold its slot for ever. Each kind has a limit in
settings; an export or import adds `rows_time_limit_seconds` per 100,000 rows once it knows its
size (a large export is expected to take longer, a stuck small one is not). `jobs/execution.py`
enforces it: past it the processor is cancelled, the attempt fails with RanPastLimit (and is
retried like any failed attempt), and the fence refuses anything the stopped attempt still tries
to write. A worker whose event loop is blocked cannot enforce anything; its lease runs out and
another worker's rescuer takes the task, as after a kill -9."""

from __future__ import annotations

from desk.core.models import TaskKind
from desk.core.settings import Settings

ROWS_UNIT = 100_000  # rows_time_limit_seconds is per this many rows


def base(settings: Settings, kind: str) -> float:
    """The kind's limit in seconds before any allowance for size."""
    limits: dict[str, float] = {
        TaskKind.EMAIL: settings.email_time_limit_seconds,
        TaskKind.MAIL_FETCH: settings.mail_fetch_time_limit_seconds,
        TaskKind.MAIL_PARSE: settings.mail_parse_time_limit_seconds,
        TaskKind.REMINDER: settings.reminder_time_limit_seconds,
        TaskKind.SLA_TIMER: settings.reminder_time_limit_seconds,
        TaskKind.TIME_RULE: settings.export_time_limit_seconds,
        TaskKind.NOOP: settings.noop_time_limit_seconds,
        TaskKind.EXPORT: settings.export_time_limit_seconds,
        TaskKind.IMPORT: settings.import_time_limit_seconds,
    }
    return limits.get(kind, settings.noop_time_limit_seconds)


def for_rows(settings: Settings, kind: str, rows: int) -> float:
    """The limit of an export or import of `rows` rows."""
    return base(settings, kind) + settings.rows_time_limit_seconds * max(rows, 0) / ROWS_UNIT
