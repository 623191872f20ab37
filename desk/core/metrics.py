"""Prometheus metrics of tasks, workers and HTTP, and the one-line hooks that feed them.

Counters and histograms live in the process that saw the event (the web counts acceptances,
conflicts and quota refusals; a worker counts claims, endings, rescues and re-sends), in
prometheus-client's default registry: Prometheus scrapes every web and worker process and sums
across them (`sum by (kind) (rate(taskdesk_tasks_completed_total[5m]))`). A worker serves its
own registry on WORKER_METRICS_PORT (`start_worker`).

The hooks are pass-throughs (`return telemetry.accepted(await …)`), so instrumenting a ledger
function is one line; each also writes one log line per event with the task's ids bound
(desk/core/logs.py). A scrape of the web's /metrics never scans the ledger: finished work is counted
by these counters; only active rows are counted, through the partial indexes on active status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, TypeVar

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client import generate_latest as _generate

from desk.core import logs
from desk.core.models import TaskStatus

log = logging.getLogger("taskdesk.tasks")
T = TypeVar("T")

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_RUN = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600)

ACCEPTED = Counter("taskdesk_tasks_accepted", "Tasks accepted (inserted WAITING)", ["kind"])
COMPLETED = Counter("taskdesk_tasks_completed", "Tasks COMPLETED (skipped included)", ["kind"])
FAILED = Counter("taskdesk_tasks_failed", "Tasks FAILED for good", ["kind"])
RETRIED = Counter("taskdesk_tasks_retried", "Failed attempts re-armed for a retry", ["kind"])
CANCELLED = Counter("taskdesk_tasks_cancelled", "Tasks CANCELLED", ["kind"])
RESCUED = Counter("taskdesk_tasks_rescued", "Tasks whose worker stopped responding", ["kind"])
RESENT = Counter("taskdesk_tasks_resent", "Messages sent again by the dispatcher", ["kind"])
CONFLICTS = Counter("taskdesk_task_conflicts", "Triggers answered with an active task", ["kind"])
QUOTA = Counter("taskdesk_quota_refusals", "Triggers refused by a quota", ["kind"])
START_LATENCY = Histogram(
    "taskdesk_task_start_latency_seconds",
    "From accepted (or due, if later) to RUNNING",
    ["kind"],
    buckets=_LATENCY,
)
RUN_TIME = Histogram(
    "taskdesk_task_run_seconds", "From RUNNING to its outcome", ["kind", "outcome"], buckets=_RUN
)
REMINDER_LATENESS = Histogram(
    "taskdesk_reminder_lateness_seconds",
    "A reminder's finish after its due time",
    buckets=_LATENCY,
)
HTTP_DURATION = Histogram(
    "taskdesk_http_request_duration_seconds",
    "HTTP requests by route template (not raw path) and status",
    ["method", "route", "status"],
    buckets=_LATENCY,
)
OVERLOADED = Counter(
    "taskdesk_http_overloaded",
    "Requests refused at once with 503 + Retry-After: the in-flight bound was reached",
    ["face"],
)
WORKER_BUSY = Gauge("taskdesk_worker_tasks_running", "Tasks this worker runs now", ["worker"])
WORKER_SLOTS = Gauge("taskdesk_worker_slots", "Tasks this worker may run at once", ["worker"])


def seconds_between(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return max(0.0, (later - earlier).total_seconds())


def _ids(task: Any) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "run": task.run,
        "kind": task.kind,
        "team_id": task.team_id,
        "execution_id": task.execution_id,
    }


def _event(event: str, task: Any, message: str, *args: Any, level: int = logging.INFO) -> None:
    log.log(level, message, *args, extra={"event": event, **_ids(task)})


# --- hooks (each returns what it was given) ---------------------------------------------------


def accepted(task: T) -> T:
    """After the insert of a new task (None: the scope was taken; nothing to count)."""
    t: Any = task
    if t is not None:
        ACCEPTED.labels(t.kind).inc()
        logs.bind(task_id=t.id, kind=t.kind, team_id=t.team_id)
        _event("accepted", t, "task %s accepted (%s)", t.id, t.kind)
    return task


def claimed(task: T) -> T:
    """After a worker's claim: start latency, and the ids on every later log line of this job."""
    t: Any = task
    if t is not None:
        began = max(t.created_at, t.run_at) if t.run_at and t.created_at else t.created_at
        seconds = seconds_between(t.started_at, began)
        if seconds is not None:
            START_LATENCY.labels(t.kind).observe(seconds)
        logs.bind(**_ids(t))
        _event("claimed", t, "task %s run %s claimed (attempt %s)", t.id, t.run, t.attempts)
    return task


_OUTCOMES = {"COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled"}


def ended(task: T) -> T:
    """After a transition that may end a round: count it by the status it reached (WAITING
    after a failure is a retry; RUNNING means a cancel was only requested)."""
    t: Any = task
    if t is None or t.status == TaskStatus.RUNNING:
        return task
    outcome = _OUTCOMES.get(t.status, "retry")
    counter = {"completed": COMPLETED, "failed": FAILED, "cancelled": CANCELLED}
    counter.get(outcome, RETRIED).labels(t.kind).inc()
    ran = seconds_between(t.finished_at or t.updated_at, t.started_at)
    if ran is not None and outcome != "cancelled":  # a cancelled row may never have run
        RUN_TIME.labels(t.kind, outcome).observe(ran)
    if outcome == "completed" and t.kind == "REMINDER" and t.started_at is not None:
        late = seconds_between(t.finished_at, t.run_at)
        if late is not None:
            REMINDER_LATENESS.observe(late)
    level = logging.WARNING if outcome == "failed" else logging.INFO
    _event(outcome, t, "task %s %s%s", t.id, outcome, _why(t), level=level)
    return task


def _why(t: Any) -> str:
    if t.status in (TaskStatus.FAILED, TaskStatus.WAITING) and t.last_error:
        return f": {t.last_error}"
    if t.status == TaskStatus.COMPLETED and t.result_summary:
        return f": {t.result_summary}"
    return ""


def rescued(tasks: list[T]) -> list[T]:
    """Rows the rescuer took back from a dead worker (re-armed, or ended when out of tries)."""
    for task in tasks:
        t: Any = task
        RESCUED.labels(t.kind).inc()
        _event("rescued", t, "task %s rescued: now %s (run %s)", t.id, t.status, t.run)
        if t.status != TaskStatus.WAITING:
            ended(t)
    return tasks


def sent(rows: Iterable[Any]) -> None:
    """Sends the dispatcher reserved; a task's second and later sends are re-sends."""
    for r in rows:
        if r.send > 1:
            RESENT.labels(r.kind).inc()


def refused(reason: str, kind: str | None) -> None:
    """A trigger refused: reason "conflict" or "quota"."""
    (CONFLICTS if reason == "conflict" else QUOTA).labels(kind or "").inc()


_OVERLOADED_BY_FACE: dict[str, Any] = {}


def overloaded(face: str) -> None:
    """A request refused by web/overload.py; `face` is "graphql" or "page". The labelled child
    is looked up once per face: a flood of refusals made `labels()` ~1 % of a web process."""
    child = _OVERLOADED_BY_FACE.get(face)
    if child is None:
        child = _OVERLOADED_BY_FACE[face] = OVERLOADED.labels(face)
    child.inc()


# --- exposure --------------------------------------------------------------------------------


def generate_latest() -> bytes:
    """This process's metrics in the Prometheus text format."""
    return _generate(REGISTRY)


async def start_worker(settings: Any, worker_id: str, running: Callable[[], int]) -> Any:
    """A worker's telemetry: its id on every log line, its gauges, and (when
    WORKER_METRICS_PORT is set) an HTTP server answering GET /metrics. Returns the server."""
    logs.bind_process(worker_id=worker_id)
    WORKER_BUSY.labels(worker_id).set_function(running)
    WORKER_SLOTS.labels(worker_id).set(settings.worker_max_jobs + settings.worker_long_slots)
    if not settings.worker_metrics_port:
        return None
    port = settings.worker_metrics_port
    try:
        server = await asyncio.start_server(_answer, "0.0.0.0", port)
    except OSError as exc:
        # Metrics are not worth refusing work for: run without them and say why, loudly.
        log.error("worker metrics NOT served: port %s unavailable (%s)", port, exc)
        return None
    log.info("worker metrics on port %s", port)
    return server


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A minimal HTTP/1.0 answer: GET /metrics (or /) → the registry; anything else → 404."""
    try:
        request = await asyncio.wait_for(reader.readline(), 5)
        while (await asyncio.wait_for(reader.readline(), 5)).strip():
            pass  # headers: not needed
        parts = request.split()
        path = parts[1].split(b"?")[0] if len(parts) > 1 else b""
        if parts[:1] == [b"GET"] and path in (b"/metrics", b"/"):
            status, ctype, body = b"200 OK", b"text/plain; version=0.0.4", generate_latest()
        else:
            status, ctype, body = b"404 Not Found", b"text/plain", b"GET /metrics\n"
        head = b"HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n" % (
            status,
            ctype,
            len(body),
        )
        writer.write(head + b"Connection: close\r\n\r\n" + body)
        await writer.drain()
    except (TimeoutError, ConnectionError):
        pass
    finally:
        writer.close()
