"""The polled fragments' short way in (issue 11): `GET /tasks/{id}` for htmx and `GET /watch`.

Most of a busy web process's requests are these two, and FastAPI's routing and dependency
solving cost more than their one SQL statement and the row's rendering (bench/README.md,
"Reads (issue 11)"). The edge layer (api/edge.py) asks `FastFragments` first, after the in-flight
bound, the request id and the body cap, and adds the security headers to its answer: it parses
the path, the query and the session by hand and calls the same viewer, desk and render
functions the routes call, so the answer is the same one.

Only the plain, successful case is taken. Any parameter it does not accept exactly as the route
would, no session, a task not found or finished, any error at all: it steps aside (None) and the
request goes the ordinary way, through the router, which gives every refusal its usual answer
(400 texts, 303 to sign in, 404 bytes identical for a missing and a hidden task). Nothing has
been sent by then.

An unfinished row, the polled answer, is `Raw`: the bytes and headers `ui.render.fragment` gives
it, without a starlette Request or Response around them.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.routing import APIRoute
from starlette.requests import HTTPConnection, Request
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope

from ui.params import Declined
from web.auth import session_secret
from web.edge import Raw

ROW_PATH = re.compile(r"/tasks/([1-9][0-9]{0,17})")
WATCH, ROW = "/watch", "/tasks/{task_id}"

__all__ = ["Declined", "FastFragments", "Raw", "row_params", "watch_params"]


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
    """The short way: `await short(scope, receive)` is its answer, or None for the router."""

    def __init__(self) -> None:
        self._routes: dict[str, BaseRoute] | None = None

    async def __call__(self, scope: Scope, receive: Receive) -> Any:
        if not _candidate(scope):
            return None
        state = dict(scope.get("state", {}))
        try:
            return await self._respond(scope, receive)
        except Exception:  # the router answers it: its errors, its pages
            scope["state"] = state
            scope.pop("path_params", None)
            scope.pop("route", None)
            return None

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

    async def _respond(self, scope: Scope, receive: Receive) -> Any:
        from ui import watch

        rt = scope["app"].state.runtime
        path = scope["path"]
        if path == WATCH:
            params = watch_params(scope)
            scope["route"] = self._route(WATCH)
            # One statement: the viewer comes with the tick (ui.watch.answer, desk.reads.tick).
            return await watch.answer(Request(scope, receive), rt, **params)
        found = ROW_PATH.fullmatch(path)
        if found is None:
            raise Declined
        since = row_params(scope)
        scope["route"] = self._route(ROW)
        scope["path_params"] = {"task_id": found.group(1)}
        return await _row(rt, scope, found.group(1), since)


async def _row(rt: Any, scope: Scope, raw_id: str, since: float | None) -> Raw:
    """An unfinished row, as the route's htmx answer (`ui.tasks_routes.task_row`) gives it:
    the session, its user and the task in one statement (`desk.reads.tasks.viewer`), the row from the
    render cache. Whatever else the route would answer (a finished row's trigger, a sign-in,
    a 404) is Declined."""
    from desk.core import inputs
    from desk.reads import tasks as reads
    from ui import i18n, render, task_lists
    from ui.viewer import zone

    task_id = inputs.optional_id(raw_id)
    secret = session_secret(rt, HTTPConnection(scope))
    if task_id is None or not secret:
        raise Declined
    # The row shows no team: unlike the route's viewer, no team list is read with the session.
    seen = await reads.viewer(rt.pg, secret, rt.clock(), task_id=task_id)
    if seen is None or seen.task is None or seen.task.task is None:
        raise Declined
    person = seen.person
    row = await task_lists.row(rt, person.id, task_id, since, found=seen.task)
    if not row.active:
        raise Declined
    accept = _header(scope, b"accept-language")
    locale = i18n.pick(person.locale, accept.decode("latin-1") if accept is not None else None)
    body, headers = render.fragment_raw(render.row_fragment(locale, row, zone(person.timezone)))
    return Raw(200, headers, body)
