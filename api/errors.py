"""How failures leave the app: a domain error as its 4xx (with `Retry-After` when it has one),
and a database outage as 503 with `Retry-After` — a page for browsers, JSON for API clients,
and never the driver's text (it can quote SQL and its parameters).
"""

from __future__ import annotations

import html
import logging
from datetime import datetime

import psycopg
import psycopg_pool
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from desk.core.errors import DeskError, QuotaExceeded, TaskConflict

log = logging.getLogger("taskdesk.web")

OUTAGE_RETRY_SECONDS = 5  # PostgreSQL restarts in ~6 s; clients try again soon after

# What a database that is down, restarting or out of connections raises (the pool's wait for a
# connection included); a bug's error (IntegrityError, ProgrammingError …) stays a 500.
DATABASE_DOWN: tuple[type[Exception], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
    psycopg_pool.PoolTimeout,
    ConnectionRefusedError,
)


class ServiceUnavailable(DeskError):
    """taskdesk cannot reach its database right now. Please try again in a moment."""

    code = "SERVICE_UNAVAILABLE"
    http_status = 503
    retry_after_seconds = OUTAGE_RETRY_SECONDS


def wants_page(request: Request) -> bool:
    """A browser (or htmx) that should get a page rather than JSON."""
    if request.headers.get("hx-request"):
        return True
    accept = request.headers.get("accept", "")
    return "text/html" in accept and "application/json" not in accept


def retry_after_headers(request: Request, exc: DeskError) -> dict[str, str]:
    """`Retry-After` for a refusal that ends by itself (quota, rate limit, outage)."""
    seconds = getattr(exc, "retry_after_seconds", None)
    if isinstance(exc, QuotaExceeded):
        runtime = getattr(request.app.state, "runtime", None)
        now: datetime = runtime.clock() if runtime is not None else exc.retry_after
        seconds = int((exc.retry_after - now).total_seconds() + 0.999)
    if seconds is None:
        return {}
    return {"Retry-After": str(max(1, int(seconds)))}


def _plain_page(exc: DeskError, request_id: str) -> str:
    message = html.escape(exc.message)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{exc.http_status} · taskdesk</title></head><body>"
        f'<h1>{exc.http_status}</h1><p class="error">{message}</p>'
        '<p><a href="/">Back to taskdesk</a></p>'
        f'<p class="request-id"><small>Request {html.escape(request_id)}</small></p></body></html>'
    )


async def desk_error_handler(request: Request, exc: Exception) -> Response:
    """Turn a domain error into its 4xx status with its message."""
    assert isinstance(exc, DeskError)
    headers = retry_after_headers(request, exc)
    body: dict[str, object] = {"code": exc.code, "message": exc.message}
    if isinstance(exc, TaskConflict):
        task_id = getattr(exc.existing, "id", None)
        if task_id is not None:
            body["task_id"] = task_id
    if request.url.path == "/graphql":  # GraphQL clients read errors[].extensions.code
        error = {"message": exc.message, "extensions": {"code": exc.code}}
        return JSONResponse({"errors": [error]}, status_code=exc.http_status, headers=headers)
    if wants_page(request):
        rid = str(getattr(request.state, "request_id", ""))
        return HTMLResponse(_plain_page(exc, rid), status_code=exc.http_status, headers=headers)
    return JSONResponse({"error": body}, status_code=exc.http_status, headers=headers)


async def database_down_handler(request: Request, exc: Exception) -> Response:
    """503 + Retry-After; the driver's message goes to the log only."""
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    problem = ServiceUnavailable()
    if wants_page(request) and request.url.path != "/graphql":
        from ui.route import error_page  # the pages' own styled error (needs no database)

        request.state.viewer = None
        return error_page(request, problem)
    return await desk_error_handler(request, problem)


def install(app: FastAPI) -> None:
    app.add_exception_handler(DeskError, desk_error_handler)
    for kind in DATABASE_DOWN:
        app.add_exception_handler(kind, database_down_handler)
