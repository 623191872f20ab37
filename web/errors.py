"""How failures leave the app, through one renderer (`answer`): HTML for whoever wants it
(web/wants.py) — the pages' styled error page, or its message block for htmx — and otherwise
the failed protocol's own data: a domain error's JSON (with `Retry-After` when it has one),
FastAPI's JSON for Starlette's refusals (404, 405, 400 …), plain text for a 500. GraphQL
clients always get the GraphQL error shape. A database outage is a 503 with `Retry-After`,
never the driver's text (it can quote SQL and its parameters).

web renders no template: the pages register their error page (`use_pages`) when they are
mounted. An app without pages answers every error as data.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

import psycopg
import psycopg_pool
import sqlalchemy.exc
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import Match

from desk.core.errors import DeskError, NotFound, QuotaExceeded, TaskConflict, ValidationProblem
from web import wants
from web.limits import API_PREFIX

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


class ServerTrouble(DeskError):
    """The server had a problem. Please try again in a moment."""

    code = "INTERNAL"
    http_status = 500


class HttpProblem(DeskError):
    """That did not work."""

    code = "HTTP"


HTTP_MESSAGES = {
    405: "This address does not take that kind of request.",
    400: "The request could not be read. Please go back and try again.",
}


@dataclass(frozen=True)
class Pages:
    """The pages' error page: `page(request, problem, headers)` renders the problem (the whole
    page, or its message block for htmx) with `headers` added last; `viewer(request)` looks up
    who is reading, best effort, so the page speaks their language."""

    page: Callable[[Request, DeskError, Mapping[str, str]], Response]
    viewer: Callable[[Request], Awaitable[None]]


def use_pages(app: FastAPI, pages: Pages) -> None:
    app.state.error_pages = pages


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


def problem_json(
    request: Request, exc: DeskError, extra: Mapping[str, str] | None = None
) -> Response:
    """A domain error as API clients read it: `{"error": {code, message[, field, task_id]}}`."""
    body: dict[str, object] = {"code": exc.code, "message": exc.message}
    if isinstance(exc, ValidationProblem):
        body["field"] = exc.field
    if isinstance(exc, TaskConflict):
        task_id = getattr(exc.existing, "id", None)
        if task_id is not None:
            body["task_id"] = task_id
    headers = retry_after_headers(request, exc) | dict(extra or {})
    return JSONResponse({"error": body}, status_code=exc.http_status, headers=headers)


def graphql_json(request: Request, exc: DeskError) -> Response:
    """GraphQL clients read errors[].extensions.code."""
    error = {"message": exc.message, "extensions": {"code": exc.code}}
    headers = retry_after_headers(request, exc)
    return JSONResponse({"errors": [error]}, status_code=exc.http_status, headers=headers)


async def answer(
    request: Request,
    problem: DeskError,
    data: Response | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    anonymous: bool = False,
) -> Response:
    """The one error renderer: the styled page (the message block for htmx) for whoever wants
    HTML, else `data` (by default the problem's JSON). `headers` go on the page after its own
    (`Allow` on a 405); `anonymous` skips looking up the reader (the database is the trouble)."""
    if api_path(request):
        return problem_json(request, problem, headers)
    pages: Pages | None = getattr(request.app.state, "error_pages", None)
    if pages is None or not wants.html(request.headers):
        return data if data is not None else problem_json(request, problem)
    if anonymous:
        request.state.viewer = None
    else:
        await pages.viewer(request)
    return pages.page(request, problem, headers or {})


def api_path(request: Request) -> bool:
    """The REST API answers data whatever the client accepts (a browser tab included)."""
    return request.url.path.startswith(API_PREFIX)


# --- the app's exception handlers -------------------------------------------------------------


async def desk_error(request: Request, exc: Exception) -> Response:
    """A domain error raised outside the pages' own routes: its 4xx with its message."""
    assert isinstance(exc, DeskError)
    if request.url.path == "/graphql":
        return graphql_json(request, exc)
    return await answer(request, exc)


async def database_down(request: Request, exc: Exception) -> Response:
    """503 + Retry-After; the driver's message goes to the log only."""
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    problem = ServiceUnavailable()
    if request.url.path == "/graphql":
        return graphql_json(request, problem)
    return await answer(request, problem, anonymous=True)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (405, 400 …): FastAPI's JSON, or the page with their headers."""
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, DeskError):
        # FastAPI turns whatever fails while it reads a body into a 400 "error parsing the
        # body"; a domain error there (the edge's BodyTooLarge, web/limits.py) keeps its answer.
        return await desk_error(request, exc.__cause__)
    if exc.status_code == 400 and api_path(request):
        # A body that could not be parsed (not UTF-8, broken multipart): the API's own answer.
        return problem_json(request, ValidationProblem("body", UNREADABLE))
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request) or headers.get("Allow", "")
    data = await http_exception_handler(request, exc)
    if exc.status_code < 400:
        return data
    data.headers.update(headers)
    problem = HttpProblem(HTTP_MESSAGES.get(exc.status_code))
    problem.http_status = exc.status_code
    return await answer(request, problem, data, headers=headers)


UNREADABLE = "could not be read: send UTF-8 JSON, or multipart/form-data as documented"


def too_many_file_parts(exc: HTTPException) -> bool:
    """Whether Starlette refused a form for having more file parts than it was told to take
    (`request.form(max_files=…)`, a bound on its temporary files): the faces answer it as the
    message's own cap (`attachments.too_many`), a 413 naming the limit, not a malformed form."""
    return exc.status_code == 400 and str(exc.detail).startswith("Too many files")


def allowed_methods(request: Request) -> str:
    """Every method some route takes at this path: Starlette's 405 names only the first
    route's, and a path has one route per method."""
    found: set[str] = set()
    for route in iter_route_contexts(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            found |= set(route.methods or ())
    return ", ".join(sorted(found))


async def not_found(request: Request, exc: Exception) -> Response:
    """An unknown address: FastAPI's JSON 404, or the pages' 404."""
    assert isinstance(exc, HTTPException)
    return await answer(request, NotFound(), await http_exception_handler(request, exc))


async def invalid_request(request: Request, exc: Exception) -> Response:
    """FastAPI's checks of a request's parameters and body: the API's typed 422 (the first
    problem, as `field: message`) for the REST API and every data client (a download's bad
    id); a browser elsewhere gets FastAPI's own answer."""
    assert isinstance(exc, RequestValidationError)
    if not api_path(request) and wants.html(request.headers):
        return await request_validation_exception_handler(request, exc)
    first = exc.errors()[0] if exc.errors() else {}
    # ("body", "team_id") names the field; ("body",) or ("body", 7) the body as a whole.
    where = [p for p in first.get("loc", ())[1:2] if isinstance(p, str)]
    field = where[0] if where else "body"
    problem = ValidationProblem(field, str(first.get("msg", "not acceptable")))
    return problem_json(request, problem)


async def server_error(request: Request, exc: Exception) -> Response:
    """Anything unexpected: a 500 that says nothing of its cause."""
    text = PlainTextResponse("Internal Server Error", status_code=500)
    return await answer(request, ServerTrouble(), text)


async def handled(request: Request, exc: Exception) -> Response | None:
    """What the app's own exception handlers (`install`) make of `exc`, for a handler the edge
    calls before the app's routing and its exception middleware (ui.watch.polled, api.short); None
    for an unexpected one, which goes on to the 500 page."""
    handlers = getattr(request.app, "exception_handlers", {})
    for kind in type(exc).__mro__:
        if kind is Exception:
            return None
        handler = handlers.get(kind)
        if handler is not None:
            got = await handler(request, exc)
            assert isinstance(got, Response)
            return got
    return None


def install(app: FastAPI) -> None:
    app.state.error_pages = None  # until the pages are mounted (use_pages)
    app.add_exception_handler(DeskError, desk_error)
    for kind in DATABASE_DOWN:
        app.add_exception_handler(kind, database_down)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(404, not_found)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, server_error)
