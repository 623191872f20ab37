"""The route of the two polled fragments (a task's row for htmx, `GET /tasks/{id}`, and the page
watcher, `GET /watch`) and what their handlers share: which request is a poll, its headers, and
a refusal answered as the pages' routes answer it.

Each polled route's handler lives beside its page code (`ui.tasks_routes.polled_row`,
`ui.watch.watcher.polled`) and registers itself here (`answers`); `ui.watch.polled.Polled`, which
the edge calls before any routing, and `PolledRoute`, for an app served without the edge, both call
the handler registered for the path, so each route has one handler whoever hands it the request
(docs/architecture.md, "Polling").
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ui.route import UiRoute, refused_page
from web.edge import Raw
from web.errors import handled

ROW_PATH = re.compile(r"/tasks/([^/]+)")  # the route's own pattern, `/tasks/{task_id}`
PLAIN_ID = re.compile(r"[1-9][0-9]{0,17}")
WATCH, ROW = "/watch", "/tasks/{task_id}"

Answer = Raw | Response
Handler = Callable[[Request], Awaitable[Answer]]
H = TypeVar("H", bound=Handler)

# path template -> the one handler of that polled route (filled as ui.tasks_routes and
# ui.watch.watcher are imported).
HANDLERS: dict[str, Handler] = {}


def answers(path: str) -> Callable[[H], H]:
    """Register `handler` as the one answer of the polled route `path`."""

    def register(handler: H) -> H:
        HANDLERS[path] = handler
        return handler

    return register


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


def which(scope: Scope) -> str | None:
    """The polled route this request is for, if any."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    path = scope["path"]
    if path == WATCH:
        return WATCH
    if path.startswith("/tasks/") and ROW_PATH.fullmatch(path) and _is_htmx(scope):
        return ROW
    return None


async def answer(path: str, scope: Scope, receive: Receive) -> Answer:
    """The answer of the polled route `path` to this request, refusals included."""
    if path == ROW:
        scope["path_params"] = {"task_id": scope["path"][len("/tasks/") :]}
    request = Request(scope, receive)
    try:
        return await HANDLERS[path](request)
    except Exception as exc:
        return await refusal(request, exc)


async def refusal(request: Request, exc: Exception) -> Response:
    """What the pages' routes answer for `exc` (ui.route.UiRoute), else what the app's own
    handlers make of it (a database outage: 503); anything unhandled is raised again."""
    page = refused_page(request, exc)
    if page is not None:
        return page
    got = await handled(request, exc)
    if got is None:  # the app's 500 page: the exception goes on to it
        raise exc
    return got


class PolledRoute(UiRoute):
    """The route of a polled fragment in the router: a request its handler takes (an app without
    the edge's call) is answered by it; any other (the row's page, another method) as usual."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if which(scope) == self.path:
            got = await answer(self.path, scope, receive)
            await got(scope, receive, send)
        else:
            await super().handle(scope, receive, send)
