"""The polled fragments' short way in (issue 11): `GET /tasks/{id}` for htmx and `GET /watch`.

Most of a busy web process's requests are these two, and FastAPI's routing and dependency
solving cost more than their one SQL statement and the row's rendering (bench/README.md,
"Reads (issue 11)"). `FastFragments` sits inside the middlewares (overload bound, request id,
security headers, body cap all apply as before) and in front of the router: it parses the path,
the query and the session by hand and calls the same viewer and endpoint functions the routes
call, so the answer is the same one.

Only the plain, successful case is taken. Any parameter it does not accept exactly as the route
would, no session, a task not found, any error at all: it steps aside and the request goes the
ordinary way, through the router, which gives every refusal its usual answer (400 texts, 303 to
sign in, 404 bytes identical for a missing and a hidden task). Nothing has been sent by then.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from ui.params import Declined

ROW_PATH = re.compile(r"/tasks/([1-9][0-9]{0,17})")
WATCH, ROW = "/watch", "/tasks/{task_id}"

__all__ = ["Declined", "FastFragments", "row_params", "watch_params"]


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _is_htmx(scope: Scope) -> bool:
    """As ui.render.is_htmx: a fragment request, not a history restore."""
    return (
        _header(scope, b"hx-request") == b"true"
        and _header(scope, b"hx-history-restore-request") != b"true"
    )


def row_params(scope: Scope) -> float | None:
    """`since` of a row poll, by the route's own spec; Declined for anything unusual."""
    from ui import params, tasks_routes

    since: float | None = params.read(scope, tasks_routes.ROW_PARAMS)["since"]
    return since


def watch_params(scope: Scope) -> dict[str, Any]:
    """The watcher's query as `ui.watch.answer` takes it, by the route's own spec; Declined
    where the route would refuse it (or might read it otherwise)."""
    from ui import params, watch

    return params.read(scope, watch.PARAMS, {"r": watch.ROWS})


def _candidate(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] != "GET":
        return False
    path = scope["path"]
    return bool(path == WATCH or (path.startswith("/tasks/") and _is_htmx(scope)))


class FastFragments:
    """Pure ASGI, the innermost middleware: the polled fragments without the router."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._routes: dict[str, BaseRoute] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _candidate(scope) and await self._answer(scope, receive, send):
            return
        await self.app(scope, receive, send)

    def _route(self, path: str) -> BaseRoute:
        """The route the router would have matched: the request log and metrics name it."""
        if self._routes is None:
            from ui import tasks_routes, watch

            routes = [*tasks_routes.router.routes, *watch.router.routes]
            self._routes = {
                r.path: r
                for r in routes
                if isinstance(r, APIRoute) and r.path in (WATCH, ROW) and "GET" in (r.methods or ())
            }
        return self._routes[path]

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """True when answered; False (and the scope as it came) when the router should."""
        state = dict(scope.get("state", {}))
        try:
            response = await self._respond(scope, receive)
        except Exception:  # the router answers it: its errors, its pages
            scope["state"] = state
            scope.pop("path_params", None)
            scope.pop("route", None)
            return False
        await response(scope, receive, send)
        return True

    async def _respond(self, scope: Scope, receive: Receive) -> Response:
        from ui import tasks_routes, watch
        from ui.viewer import fragment_viewer

        rt = scope["app"].state.runtime
        path = scope["path"]
        if path == WATCH:
            params = watch_params(scope)
            scope["route"] = self._route(WATCH)
            # One statement: the viewer comes with the tick (ui.watch.answer, desk.tick).
            return await watch.answer(Request(scope, receive), rt, **params)
        found = ROW_PATH.fullmatch(path)
        if found is None:
            raise Declined
        since = row_params(scope)
        scope["route"] = self._route(ROW)
        scope["path_params"] = {"task_id": found.group(1)}
        request = Request(scope, receive)
        v = await fragment_viewer(request, rt)
        return await tasks_routes.task_row(request, int(found.group(1)), rt, v, since)
