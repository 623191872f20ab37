"""The polled fragments, each answered by one handler: a task's row for htmx
(`GET /tasks/{id}` with `HX-Request`, the row a page polls) and the page watcher (`GET /watch`).

Most of a busy web process's requests are these two, and FastAPI's routing and dependency
solving would cost more than their one SQL statement and the row's rendering (docs/architecture.md,
"Polling"). So they are raw ASGI handlers: the edge layer (api/edge.py) calls `Polled` before any
routing, and their routes (`PolledRoute`, for an app served without the edge) hand the request to
the same `Polled`. Each handler gives every answer itself — the fragment, a finished row's
trigger, the watcher's 204, and every refusal as the pages' routes give it (ui.route): sign-in
(303, or `HX-Redirect` for htmx), the same 404 for a missing and a hidden task, 400 with the
parameter's message, and what the app's own handlers make of anything else (a database outage's
503); an unexpected error escapes to the app's 500 page.

The query is read in its plain spelling without a validator (ui.params); an odd one is read
again, after the session, by the validator that says what is wrong with it.

An unfinished row, the polled answer, is `Raw`: the bytes and headers `ui.render.fragment` gives
it, without a starlette Request or Response around them.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ui.params import Declined
from ui.route import UiRoute
from web.edge import Raw

ROW_PATH = re.compile(r"/tasks/([^/]+)")  # the route's own pattern, `/tasks/{task_id}`
PLAIN_ID = re.compile(r"[1-9][0-9]{0,17}")
WATCH, ROW = "/watch", "/tasks/{task_id}"

__all__ = ["Declined", "Polled", "PolledRoute", "Raw", "header", "row_params", "watch_params"]


Answer = Raw | Response


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def _is_htmx(scope: Scope) -> bool:
    """As ui.render.is_htmx: a fragment request, not a history restore."""
    return (
        header(scope, b"hx-request") == "true"
        and header(scope, b"hx-history-restore-request") != "true"
    )


def row_params(scope: Scope) -> float | None:
    """`since` of a row poll in its plain spelling; Declined for anything else."""
    from ui import params, tasks_routes

    since: float | None = params.read(scope, tasks_routes.ROW_PARAMS)["since"]
    return since


def watch_params(scope: Scope) -> dict[str, Any]:
    """The watcher's query as `ui.watch.answer` takes it, in its plain spelling; Declined
    for anything else."""
    from ui import params, watch

    return params.read(scope, watch.PARAMS, {"r": watch.ROWS})


def _which(scope: Scope) -> str | None:
    """The polled route this request is for, if any."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    path = scope["path"]
    if path == WATCH:
        return WATCH
    if path.startswith("/tasks/") and ROW_PATH.fullmatch(path) and _is_htmx(scope):
        return ROW
    return None


class Polled:
    """`await polled(scope, receive)`: the answer of a polled route, or None for any other
    request (the router's)."""

    def __init__(self) -> None:
        self._routes: dict[str, Any] | None = None

    async def __call__(self, scope: Scope, receive: Receive) -> Answer | None:
        which = _which(scope)
        if which is None:
            return None
        if scope.get("route") is None:
            scope["route"] = self._route(which)  # the request log and metrics name it
        if which == ROW:
            scope["path_params"] = {"task_id": scope["path"][len("/tasks/") :]}
        request = Request(scope, receive)
        try:
            if which == WATCH:
                from ui import watch

                return await watch.polled(request)
            from ui import tasks_routes

            return await tasks_routes.polled_row(request)
        except Exception as exc:
            return await refusal(request, exc)

    def _route(self, path: str) -> Any:
        """The route the router would have matched."""
        if self._routes is None:
            from ui import tasks_routes, watch

            routes = [*tasks_routes.router.routes, *watch.router.routes]
            self._routes = {
                r.path: r for r in routes if isinstance(r, PolledRoute) and r.path in (WATCH, ROW)
            }
        return self._routes[path]


async def refusal(request: Request, exc: Exception) -> Response:
    """What the pages' routes answer for `exc` (ui.route.UiRoute), else what the app's own
    handlers make of it (a database outage: 503); anything unhandled is raised again."""
    from desk.core.errors import DeskError, Unauthenticated
    from ui.route import error_page, redirect
    from ui.viewer import LoginRequired, login_url

    if isinstance(exc, LoginRequired | Unauthenticated):
        next_url = exc.next_url if isinstance(exc, LoginRequired) else "/tickets"
        return redirect(request, login_url(next_url))
    if isinstance(exc, DeskError):
        return error_page(request, exc)
    handlers = getattr(request.app, "exception_handlers", {})
    for kind in type(exc).__mro__:
        if kind is Exception:  # the app's 500 page: the exception goes on to it
            break
        handler = handlers.get(kind)
        if handler is not None:
            answer = await handler(request, exc)
            assert isinstance(answer, Response)
            return answer
    raise exc


_POLLED = Polled()


class PolledRoute(UiRoute):
    """The route of a polled fragment in the router: a request the handler takes (an app without
    the edge's call) is answered by it; any other (the row's page, another method) as usual."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        got = await _POLLED(scope, receive)
        if got is None:
            await super().handle(scope, receive, send)
        else:
            await got(scope, receive, send)
