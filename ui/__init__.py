"""The HTMX pages: `mount(app)` adds their routes and static files to the FastAPI app."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from desk.core.errors import DeskError
from ui.viewer import viewer_for_error

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI) -> None:
    from ui import (
        admin_routes,
        auth_routes,
        chrome_routes,
        import_routes,
        reminders_box,
        tasks_routes,
        tickets_routes,
        watch,
    )

    for module in (
        auth_routes,
        tickets_routes,
        reminders_box,
        tasks_routes,
        chrome_routes,
        admin_routes,
        import_routes,
        watch,
    ):
        app.include_router(module.router, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_exception_handler(404, not_found)
    _style_error_pages(app)


def _style_error_pages(app: FastAPI) -> None:
    """Errors of the plain routes (a download's 404, a report's 403) and unexpected ones (500)
    reach a browser as the pages' own styled error page; API clients keep their JSON."""
    plain = app.exception_handlers.get(DeskError)

    async def desk_error(request: Request, exc: Exception) -> Response:
        from ui.route import error_page

        assert isinstance(exc, DeskError)
        answer = plain(request, exc) if plain else None
        if isinstance(answer, Awaitable):
            answer = await answer
        if isinstance(answer, Response) and answer.media_type != "text/html":
            return answer  # JSON for API clients, as the app decided
        await viewer_for_error(request)
        styled = error_page(request, exc)
        for name in ("retry-after",):
            if answer is not None and name in answer.headers:
                styled.headers[name] = answer.headers[name]
        return styled

    async def server_error(request: Request, exc: Exception) -> Response:
        from ui.route import error_page

        if not _wants_page(request):
            return PlainTextResponse("Internal Server Error", status_code=500)
        await viewer_for_error(request)
        return error_page(request, ServerTrouble())

    app.add_exception_handler(DeskError, desk_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, server_error)


class HttpProblem(DeskError):
    """That did not work."""

    code = "HTTP"


HTTP_MESSAGES = {
    405: "This address does not take that kind of request.",
    400: "The request could not be read. Please go back and try again.",
}


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (405, 400 …) as styled pages for a browser; JSON otherwise."""
    from ui.route import error_page

    assert isinstance(exc, HTTPException)
    if not _wants_page(request) or exc.status_code < 400:
        return await http_exception_handler(request, exc)
    problem = HttpProblem(HTTP_MESSAGES.get(exc.status_code))
    problem.http_status = exc.status_code
    await viewer_for_error(request)
    styled = error_page(request, problem)
    for name, value in (exc.headers or {}).items():
        styled.headers[name] = value  # e.g. Allow on a 405
    return styled


class ServerTrouble(DeskError):
    """The server had a problem. Please try again in a moment."""

    code = "INTERNAL"
    http_status = 500


def _wants_page(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/html" in accept or request.headers.get("hx-request") == "true"


async def not_found(request: Request, exc: Exception) -> Response:
    """An unknown address: the pages' 404 for a browser, the usual JSON for anything else."""
    from desk.core.errors import NotFound
    from ui.route import error_page

    if _wants_page(request):
        await viewer_for_error(request)
        return error_page(request, NotFound())
    assert isinstance(exc, HTTPException)
    return await http_exception_handler(request, exc)
