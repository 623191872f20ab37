"""The HTMX pages: `mount(app)` adds their routes and static files to the FastAPI app."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

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
    )

    for module in (
        auth_routes,
        tickets_routes,
        reminders_box,
        tasks_routes,
        chrome_routes,
        admin_routes,
        import_routes,
    ):
        app.include_router(module.router, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_exception_handler(404, not_found)


async def not_found(request: Request, exc: Exception) -> Response:
    """An unknown address: the pages' 404 for a browser, the usual JSON for anything else."""
    from desk.errors import NotFound
    from ui.route import error_page

    accept = request.headers.get("accept", "")
    if "text/html" in accept or request.headers.get("hx-request") == "true":
        return error_page(request, NotFound())
    assert isinstance(exc, HTTPException)
    return await http_exception_handler(request, exc)
