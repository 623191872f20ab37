"""The HTMX pages: `mount(app)` adds their routes and static files to the FastAPI app, and
registers their styled error page as the one every error a browser gets is rendered with
(web/errors.py)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from desk.core.settings import Env
from web import errors

STATIC = Path(__file__).parent / "static"


def mount(app: FastAPI) -> None:
    # Imported here so that importing one page module (ui.watch.polled, at the app's import) does
    # not load every page and the templates.
    from ui import (
        admin_routes,
        auth_routes,
        chrome_routes,
        clock_routes,
        devmail_routes,
        import_routes,
        link_routes,
        mailbox_routes,
        reminders_box,
        schedules_routes,
        settings_routes,
        tasks_routes,
        thread_routes,
        ticket_live,
        tickets_routes,
    )
    from ui.route import error_page
    from ui.viewer import viewer_for_error
    from ui.watch import watcher

    for module in (
        auth_routes,
        tickets_routes,
        thread_routes,
        ticket_live,
        reminders_box,
        tasks_routes,
        chrome_routes,
        admin_routes,
        mailbox_routes,
        import_routes,
        schedules_routes,
        clock_routes,
        settings_routes,
        link_routes,
        watcher,
    ):
        app.include_router(module.router, include_in_schema=False)
    if app.state.settings.taskdesk_env is Env.DEV:
        # Outside development /dev/mail does not exist at all, like GraphiQL in production.
        app.include_router(devmail_routes.router, include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    errors.use_pages(app, errors.Pages(page=error_page, viewer=viewer_for_error))
