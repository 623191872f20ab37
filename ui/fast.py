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
from urllib.parse import parse_qsl

from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

ROW_PATH = re.compile(r"/tasks/([1-9][0-9]{0,17})")
UNSIGNED = re.compile(r"0|[1-9][0-9]{0,17}")
SIGNED = re.compile(r"-?(0|[1-9][0-9]{0,17})")
SINCE = re.compile(r"[0-9]{1,15}(\.[0-9]{1,9})?")
WATCH, ROW = "/watch", "/tasks/{task_id}"
WATCH_SCALARS = {"bell", "h", "list", "newest", "limit"}


class Declined(Exception):
    """The short way does not take this request; the router will."""


def _query(scope: Scope) -> list[tuple[str, str]]:
    # As Starlette reads it (QueryParams): latin-1, blank values kept.
    raw = scope.get("query_string", b"")
    return parse_qsl(raw.decode("latin-1"), keep_blank_values=True) if raw else []


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
    """`since` of a row poll (the route's only parameter); Declined for anything unusual."""
    since: float | None = None
    for name, value in _query(scope):
        if name == "since":
            if not SINCE.fullmatch(value):
                raise Declined
            since = float(value)
    return since


def _int(value: str, pattern: re.Pattern[str], low: int, high: int | None = None) -> int:
    if not pattern.fullmatch(value):
        raise Declined
    number = int(value)
    if number < low or (high is not None and number > high):
        raise Declined
    return number


def watch_params(scope: Scope) -> dict[str, Any]:
    """The watcher's query as `ui.watch.watch` takes it; Declined where the route would refuse
    it (or might read it otherwise)."""
    from ui import task_lists, watch

    rows: list[str] = []
    scalars: dict[str, str] = {}
    for name, value in _query(scope):
        if name == "r":
            rows.append(value)
        elif name in WATCH_SCALARS:
            scalars[name] = value  # the last one wins, as for the route
    if len(rows) > watch.MAX_ROWS:
        raise Declined
    out: dict[str, Any] = {"r": rows, "bell": None, "health_v": None, "list_name": None}
    if "bell" in scalars:
        out["bell"] = _int(scalars["bell"], SIGNED, -1)
    if "h" in scalars:
        if len(scalars["h"]) > 16:
            raise Declined
        out["health_v"] = scalars["h"]
    if "list" in scalars:
        if scalars["list"] not in watch.LISTS:
            raise Declined
        out["list_name"] = scalars["list"]
    out["newest"] = _int(scalars["newest"], UNSIGNED, 0) if "newest" in scalars else 0
    limit = scalars.get("limit")
    page = task_lists.PAGE_SIZE
    out["limit"] = _int(limit, UNSIGNED, 1, page) if limit else task_lists.PANEL_SIZE
    return out


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
        from ui.viewer import bell_viewer, fragment_viewer

        rt = scope["app"].state.runtime
        path = scope["path"]
        if path == WATCH:
            params = watch_params(scope)
            scope["route"] = self._route(WATCH)
            request = Request(scope, receive)
            v = await bell_viewer(request, rt)
            return await watch.watch(request, rt, v, **params)
        found = ROW_PATH.fullmatch(path)
        if found is None:
            raise Declined
        since = row_params(scope)
        scope["route"] = self._route(ROW)
        scope["path_params"] = {"task_id": found.group(1)}
        request = Request(scope, receive)
        v = await fragment_viewer(request, rt)
        return await tasks_routes.task_row(request, int(found.group(1)), rt, v, since)
