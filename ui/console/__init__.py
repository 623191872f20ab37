"""The operators' console under /ops: overview, tasks, a task's story, failures by error,
workers, lanes, mailboxes, the audit trail and (operators only) teams. `mount(app)` adds its routes (api/app.py MOUNTS calls it).

Who sees it is decided once per request by `ui.console.route.ConsoleRoute`: operators see every team,
a team admin their own teams; anyone else gets the unknown-address 404. Live blocks follow the
change feed through `ui.console.live`'s event stream.
"""

from __future__ import annotations

from fastapi import FastAPI


def mount(app: FastAPI) -> None:
    from ui.console import (
        failures_routes,
        live,
        mailboxes_routes,
        overview_routes,
        schedules_routes,
        tasks_routes,
        teams_routes,
        workers_routes,
    )

    for module in (
        overview_routes,
        tasks_routes,
        failures_routes,
        mailboxes_routes,
        workers_routes,
        schedules_routes,
        teams_routes,
        live,
    ):
        app.include_router(module.router, include_in_schema=False)
