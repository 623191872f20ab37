"""Plain HTTP routes: /health, /metrics and the export download."""

from __future__ import annotations

import sqlalchemy as sa
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest

from api.auth import CurrentCaller, RuntimeDep
from desk import health, tasks

router = APIRouter()


@router.get("/health", tags=["ops"])
async def get_health(rt: RuntimeDep) -> JSONResponse:
    """200 when Redis answers, a worker is alive and nothing waits overdue; 503 otherwise."""
    report = await health.check(rt)
    return JSONResponse(report.as_dict(), status_code=200 if report.ok else 503)


@router.get("/metrics", tags=["ops"])
async def metrics(rt: RuntimeDep) -> Response:
    registry = CollectorRegistry()
    by_status = Gauge(
        "taskdesk_tasks",
        "Tasks in the ledger by kind and status",
        ["kind", "status"],
        registry=registry,
    )
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT kind, status, count(*) AS n FROM background_task GROUP BY 1, 2")
        )
        for r in rows:
            by_status.labels(r.kind, r.status).set(r.n)
    report = await health.check(rt)
    Gauge("taskdesk_workers", "Live workers", registry=registry).set(len(report.workers))
    Gauge("taskdesk_queue_depth", "Messages waiting in arq", registry=registry).set(
        report.queue_depth or 0
    )
    Gauge(
        "taskdesk_oldest_overdue_seconds",
        "Age of the oldest overdue WAITING task",
        registry=registry,
    ).set(report.oldest_overdue_seconds or 0)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/tasks/{task_id}/download", tags=["tasks"])
async def download(task_id: int, rt: RuntimeDep, caller: CurrentCaller) -> StreamingResponse:
    """The owner's CSV while it has not expired; everybody else gets 404, as for a missing task."""
    f = await tasks.open_export_result(rt, caller.user_id, task_id)
    return StreamingResponse(
        f.chunks,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{f.filename}"',
            "Content-Length": str(f.size),
            "Cache-Control": "private, no-store",
        },
    )
