"""The web application: `create_app()` builds it, its lifespan opens and closes the Runtime.

Nothing is created at import time. Routers are mounted in one place (MOUNTS, below). Failures
leave through web/errors.py (domain errors as 4xx, a database outage as 503, as a page for
browsers with the pages' error page, which the pages register when mounted); one edge layer
(web/edge.py) bounds the requests in flight, caps request bodies while read, puts the security
headers and the request id on every answer and logs it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from api import openapi
from api.short import Short
from desk.core import heap, logs, tracing
from desk.core.runtime import Runtime
from desk.core.settings import ConfigError, Env, Settings, load_settings
from desk.reads.memory import Memory
from web import errors
from web.edge import Edge

# --- Routers ----------------------------------------------------------------------------------
# Every router is mounted by one function here, in order (the first route that matches wins).
# Add yours to MOUNTS; import inside the function so importing api.app stays cheap and free of
# side effects. Each function gets the app and the settings it was created with.


def _mount_plain_routes(app: FastAPI, settings: Settings) -> None:
    from api import routes  # /health, /metrics, /tasks/{id}/download

    app.include_router(routes.router)


def _mount_rest(app: FastAPI, settings: Settings) -> None:
    from api import rest, rest_mailboxes, rest_messages  # /api/v1: the trigger contract, …

    app.include_router(rest.router)
    app.include_router(rest_messages.router)
    from api import rest_tickets

    app.include_router(rest_tickets.router)  # tickets, with their SLA for staff
    app.include_router(rest_mailboxes.router)  # the team's mailboxes (admins)
    from api import rest_clocks

    app.include_router(rest_clocks.router)  # the team's SLA policy and time rules


def _mount_graphql(app: FastAPI, settings: Settings) -> None:
    from schema.app import graphql_router
    from web.auth import identify

    app.include_router(graphql_router(settings, identify))


def _mount_ui(app: FastAPI, settings: Settings) -> None:
    import ui  # the HTMX pages and /static

    ui.mount(app)


def _mount_console(app: FastAPI, settings: Settings) -> None:
    import ui.console  # the operators' console: /ops, /ops/tasks, /ops/failures, ...

    ui.console.mount(app)


MOUNTS: list[Callable[[FastAPI, Settings], None]] = [
    # The busiest routed paths first: routes are matched in order, and every router passed by
    # costs a scan of its routes (the pages' polled fragments are answered by ui.watch.polled before
    # any routing). /graphql, then the REST API whose status reads scripts poll
    # (bench status-read rest). No path overlaps.
    _mount_graphql,  # schema: /graphql (GraphiQL outside production)
    _mount_rest,  # /api/v1/...
    _mount_ui,  # pages: /, /login, /tickets, ...
    _mount_plain_routes,
    _mount_console,  # the operators' console: /ops/...
]


def mount(app: FastAPI, settings: Settings) -> None:
    for add in MOUNTS:
        add(app, settings)


# --- The factory ------------------------------------------------------------------------------


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    # Web requests are short: a statement running longer is cancelled (docs/graphql.md).
    rt = await Runtime.open(
        settings,
        statement_timeout_ms=settings.web_statement_timeout_ms,
        application_name="taskdesk-web",
    )
    app.state.runtime = rt
    # The change feed (docs/architecture.md, "Change feed"): pushed news, and the page
    # watcher's unchanged ticks answered from this process's memory of it.
    app.state.memory = Memory(rt.listen())
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
    app = create_app(settings)
    heap.space_passes()  # desk/core/heap.py: the collector's passes in a web process
    startup = app.router.lifespan_context

    @asynccontextmanager
    async def frozen(served: FastAPI) -> AsyncIterator[Any]:
        async with startup(served) as state:
            heap.freeze_startup()
            yield state

    app.router.lifespan_context = frozen
    return app


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app; settings default to the environment (as `taskdesk serve` sets it up)."""
    settings = settings or load_settings()
    for name in ("database_url", "redis_url"):
        if not getattr(settings, name):
            raise ConfigError(f"{name.upper()} is not set: run `taskdesk dev`, or set it")
    prod = settings.taskdesk_env is Env.PROD
    # Production publishes no API docs (like GraphiQL, they are for development).
    app = FastAPI(
        title="taskdesk",
        lifespan=lifespan,
        # taskdesk traces its own requests (web/edge.py, desk/core/tracing.py) and exports its
        # own metrics (/metrics). FastAPI's native telemetry would add a second span per request
        # wherever a global OpenTelemetry provider is set (`opentelemetry-instrument` sets one),
        # and otherwise still asks for the three global providers (environment lookups) on every
        # request: ~1 % of a web process refusing a flood (the load drill's profile).
        telemetry={"tracing": False, "metrics": False, "logs": False},
        docs_url=None if prod else "/docs",
        redoc_url=None if prod else "/redoc",
        openapi_url=None if prod else "/openapi.json",
    )
    app.state.settings = settings
    openapi.complete(app)  # every operation's error answers in /openapi.json
    errors.install(app)  # domain errors as 4xx, a database outage as 503 (web/errors.py)
    # One layer for what every request gets (web/edge.py): the in-flight bound, request id, log
    # line and metric, body cap, security headers; and the handlers of the polled fragments and
    # the REST task read, called before any routing (api/short.py).
    app.add_middleware(Edge, settings=settings, prod=prod, short=Short())
    mount(app, settings)
    return app
