"""The polled fragments, each answered by one handler: a task's row for htmx
(`GET /tasks/{id}` with `HX-Request`, the row a page polls) and the page watcher (`GET /watch`).

Most of a busy web process's requests are these two, and FastAPI's routing and dependency
solving would cost more than their one SQL statement and the row's rendering (docs/architecture.md,
"Polling"). So they are raw ASGI handlers: the edge layer (web/edge.py) calls `Polled` before any
routing, and their routes (`ui.watch.polled_route.PolledRoute`, for an app served without the edge)
call the same handler. Each handler gives every answer itself — the fragment, a finished row's
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

from typing import Any

from starlette.types import Receive, Scope

from ui import params, tasks_routes
from ui.params import Declined
from ui.watch import watcher
from ui.watch.polled_route import ROW, WATCH, Answer, PolledRoute, answer, which

__all__ = ["Declined", "Polled", "row_params", "watch_params"]


def row_params(scope: Scope) -> float | None:
    """`since` of a row poll in its plain spelling; Declined for anything else."""
    since: float | None = params.read(scope, tasks_routes.ROW_PARAMS)["since"]
    return since


def watch_params(scope: Scope) -> dict[str, Any]:
    """The watcher's query as `ui.watch.watcher.answer` takes it, in its plain spelling; Declined
    for anything else."""
    return params.read(scope, watcher.PARAMS, {"r": watcher.ROWS})


class Polled:
    """`await polled(scope, receive)`: the answer of a polled route, or None for any other
    request (the router's)."""

    def __init__(self) -> None:
        routes = [*tasks_routes.router.routes, *watcher.router.routes]
        # The route the router would have matched: the request log and metrics name it.
        self._routes: dict[str, Any] = {
            r.path: r for r in routes if isinstance(r, PolledRoute) and r.path in (WATCH, ROW)
        }

    async def __call__(self, scope: Scope, receive: Receive) -> Answer | None:
        path = which(scope)
        if path is None:
            return None
        if scope.get("route") is None:
            scope["route"] = self._routes[path]
        return await answer(path, scope, receive)
