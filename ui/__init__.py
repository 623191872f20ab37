"""The HTMX pages: `mount(app)` adds their routes and static files to the FastAPI app."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI) -> None:
    from ui import (
        admin_routes,
        auth_routes,
        chrome_routes,
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
    ):
        app.include_router(module.router, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
