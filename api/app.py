"""The web application: `create_app()` builds it, its lifespan opens and closes the Runtime.

Nothing is created at import time. Routers are mounted in one place (MOUNTS, below), and the
domain's expected errors (`desk.errors.DeskError`) become 4xx answers here — JSON for API
clients, a small HTML page for browsers — never a 500.
"""

from __future__ import annotations

import html
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from api.limits import BodyLimit
from api.observe import Observe
from desk import logs, tracing
from desk.errors import DeskError, QuotaExceeded, TaskConflict
from desk.runtime import Runtime
from desk.settings import ConfigError, Settings, load_settings

# --- Routers ----------------------------------------------------------------------------------
# Every router is mounted by one function here, in order (the first route that matches wins).
# Add yours to MOUNTS; import inside the function so importing api.app stays cheap and free of
# side effects. Each function gets the app and the settings it was created with.


def _mount_ops(app: FastAPI, settings: Settings) -> None:
    from api import routes  # /health, /metrics, /tasks/{id}/download

    app.include_router(routes.router)


def _mount_graphql(app: FastAPI, settings: Settings) -> None:
    from api.auth import identify
    from schema.app import graphql_router

    app.include_router(graphql_router(settings, identify))


def _mount_ui(app: FastAPI, settings: Settings) -> None:
    import ui  # the HTMX pages and /static

    ui.mount(app)


def _mount_placeholder_home(app: FastAPI, settings: Settings) -> None:
    # Last on purpose: the UI's own "/" (when it lands) is mounted before it and wins.
    app.include_router(home)


MOUNTS: list[Callable[[FastAPI, Settings], None]] = [
    _mount_ops,
    _mount_graphql,  # schema: /graphql (GraphiQL outside production)
    _mount_ui,  # pages: /, /login, /tickets, ...
    _mount_placeholder_home,
]


def mount(app: FastAPI, settings: Settings) -> None:
    for add in MOUNTS:
        add(app, settings)


# --- Placeholder home page (until the pages land) ---------------------------------------------

home = APIRouter()

PLACEHOLDER = """<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>taskdesk</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 3rem auto">
<h1>taskdesk</h1>
<p>A helpdesk whose slow work runs in the background and is never lost.</p>
<p>The pages come soon. Meanwhile, try the API in <a href="/graphql">GraphiQL</a>
or look at <a href="/health">/health</a>.</p>
</body>
</html>
"""


@home.get("/", response_class=HTMLResponse, include_in_schema=False)
async def placeholder_home() -> HTMLResponse:
    return HTMLResponse(PLACEHOLDER)


# --- Expected errors --------------------------------------------------------------------------


def _wants_html(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/html" in accept and "application/json" not in accept


def _error_page(exc: DeskError, request_id: str) -> str:
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
    headers: dict[str, str] = {}
    body: dict[str, object] = {"code": exc.code, "message": exc.message}
    if isinstance(exc, QuotaExceeded):
        seconds = max(1, int((exc.retry_after - datetime.now(UTC)).total_seconds()))
        headers["Retry-After"] = str(seconds)
    if isinstance(exc, TaskConflict):
        task_id = getattr(exc.existing, "id", None)
        if task_id is not None:
            body["task_id"] = task_id
    if request.headers.get("hx-request") or _wants_html(request):
        rid = getattr(request.state, "request_id", "")
        return HTMLResponse(_error_page(exc, rid), status_code=exc.http_status, headers=headers)
    return JSONResponse({"error": body}, status_code=exc.http_status, headers=headers)


# --- The factory ------------------------------------------------------------------------------


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    rt = await Runtime.open(settings)
    app.state.runtime = rt
    try:
        yield
    finally:
        await rt.close()


def create_served_app() -> FastAPI:
    """The factory `taskdesk serve` hands uvicorn: this process's logging and tracing (as the
    settings say), then the app. Tests call `create_app` and keep pytest's logging."""
    settings = load_settings()
    logs.setup(settings.log_format, settings.log_level)
    # Observe writes one line per request, with its id, route and duration: it replaces
    # uvicorn's access log, which knows neither.
    logging.getLogger("uvicorn.access").disabled = True
    tracing.setup(settings, "taskdesk-web")
    return create_app(settings)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app; settings default to the environment (as `taskdesk serve` sets it up)."""
    settings = settings or load_settings()
    for name in ("database_url", "redis_url"):
        if not getattr(settings, name):
            raise ConfigError(f"{name.upper()} is not set: run `taskdesk dev`, or set it")
    app = FastAPI(title="taskdesk", lifespan=lifespan)
    app.state.settings = settings
    app.add_exception_handler(DeskError, desk_error_handler)
    app.add_middleware(BodyLimit, max_bytes=settings.import_max_bytes)
    app.add_middleware(Observe)  # outermost: request id and duration of every request
    mount(app, settings)
    return app
