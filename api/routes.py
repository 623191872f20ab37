"""Plain HTTP routes: /health, /metrics, the export and attachment downloads, and import uploads
and reports.

/health detail and /metrics are for operators only (web.operator_access): anyone else gets a
plain `ok` (or `unavailable`, 503) from /health and "not found" from /metrics.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST

from api.forms import CSV_FILE, csv_part, only_fields
from api.openapi import (
    DOWNLOAD_RESPONSES,
    ERRORS,
    HEALTH_RESPONSES,
    METRICS_RESPONSES,
    multipart,
)
from desk.console import health, scrape
from desk.imports import service as imports
from desk.reads import conversation
from desk.work import tasks
from web.auth import CurrentCaller, RuntimeDep
from web.csrf import require_csrf
from web.limits import BodyTooLarge
from web.operator_access import OpsAccess, OpsViewer

router = APIRouter()


@router.get("/health", tags=["ops"], responses=HEALTH_RESPONSES)
async def get_health(rt: RuntimeDep, detail: OpsViewer) -> Response:
    """200 when Redis answers, a worker is alive and nothing waits overdue; 503 otherwise.
    Operators get the report; anyone else only `ok` / `unavailable`."""
    report = await health.check(rt)
    status = 200 if report.ok else 503
    if not detail:
        return PlainTextResponse("ok" if report.ok else "unavailable", status_code=status)
    return JSONResponse(report.as_dict(), status_code=status)


@router.get("/metrics", tags=["ops"], dependencies=[OpsAccess], responses=METRICS_RESPONSES)
async def metrics(rt: RuntimeDep) -> Response:
    """Prometheus text: this process's counters and histograms, then the ledger's active rows
    (an index path, never a scan of finished work) and the workers/queue gauges."""
    return Response(await scrape.scrape(rt), media_type=CONTENT_TYPE_LATEST)


@router.get("/tasks/{task_id}/download", tags=["tasks"], responses=DOWNLOAD_RESPONSES)
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


@router.get("/attachments/{attachment_id}", tags=["tickets"], responses=DOWNLOAD_RESPONSES)
async def attachment(
    attachment_id: int, rt: RuntimeDep, caller: CurrentCaller
) -> StreamingResponse:
    """A message's file, for exactly those who may read the message (a staged upload: its
    uploader); anyone else gets 404, as for a missing file. Always a download, never rendered:
    a file is what its sender says it is, and the browser must not guess otherwise."""
    f = await conversation.open_attachment(rt, caller.user_id, attachment_id)
    a = f.attachment
    return StreamingResponse(
        f.chunks,
        media_type=a.content_type,
        headers={
            "Content-Disposition": disposition(a.filename),
            "Content-Length": str(a.size),
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "private, no-store",
            "Content-Security-Policy": "default-src 'none'; sandbox",
        },
    )


def disposition(filename: str) -> str:
    """`attachment` with an ASCII fallback name and the real one in RFC 5987 form, so 截图.png
    keeps its name and no quote or control character reaches the header."""
    plain = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in filename)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(filename, safe='')}"


_UPLOAD_FORM = {"file": CSV_FILE, "csrf_token": {"type": "string"}}


@router.post(
    "/teams/{team_id}/imports/uploads",
    tags=["imports"],
    status_code=201,
    responses=ERRORS.write_file,
    openapi_extra=multipart(_UPLOAD_FORM, required=["file"]),
)
async def upload_import_file(
    team_id: int, request: Request, rt: RuntimeDep, caller: CurrentCaller
) -> JSONResponse:
    """Store a CSV for an import (admins only); then start it with GraphQL `startImport(uploadId)`.

    Multipart with one `file` field. A cookie-authenticated call must carry the session's CSRF
    token (`X-CSRF-Token` header or `csrf_token` field); a bearer token needs none."""
    if caller.via == "cookie":
        await require_csrf(rt, request)
    form = await request.form(
        max_files=1, max_fields=4, max_part_size=rt.settings.import_max_bytes + 1
    )
    only_fields(form, _UPLOAD_FORM)
    data, name = await csv_part(form.get("file"), rt.settings.import_max_bytes)
    if len(data) > rt.settings.import_max_bytes:
        raise BodyTooLarge(rt.settings.import_max_bytes, "An import file")
    stored = await imports.store_upload(rt, caller.user_id, team_id, name, data, header=False)
    return JSONResponse(
        {"uploadId": stored.id, "filename": stored.filename, "size": stored.size}, status_code=201
    )


@router.get("/tasks/{task_id}/report", tags=["imports"], responses=DOWNLOAD_RESPONSES)
async def import_report(task_id: int, rt: RuntimeDep, caller: CurrentCaller) -> StreamingResponse:
    """An import's rejected rows as CSV (row, column, reason); 404 for whoever may not see it."""
    chunks = await imports.open_report(rt, caller.user_id, task_id)
    return StreamingResponse(
        chunks,
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="import-{task_id}-rejected-rows.csv"'
        },
    )
