"""The requests the edge answers before any routing (web/edge.py's short way): the pages' polled
fragments (ui.watch.polled) and the REST task read, `GET /api/v1/tasks/{id}`.

Scripts poll that read as pages poll their rows, and FastAPI's route matching and dependency
solving around it cost about a third of its CPU (bench status-read rest: 301 µs a request
through the router against 195 µs for the row the pages poll; docs/architecture.md, "Polling").
Here it is the same handler its route calls (`api.rest.get_task`), with the same answers:
refusals are what the app's exception handlers make of them (web.errors.handled), and the
request log and metrics name the route as the router would have.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.types import Receive, Scope

from api import rest
from ui.watch.polled import Polled
from ui.watch.polled_route import Answer
from web.errors import handled

TASK_READ = re.compile(re.escape(rest.PREFIX) + r"/tasks/([^/]+)")  # the route's `{task_id}`


class Short:
    """`await short(scope, receive)`: the answer of a request the edge may answer before any
    routing, or None for the router."""

    def __init__(self) -> None:
        self._polled = Polled()
        path = rest.PREFIX + "/tasks/{task_id}"
        routes = [r for r in rest.router.routes if getattr(r, "path", None) == path]
        self._task_route: Any = routes[0]

    async def __call__(self, scope: Scope, receive: Receive) -> Answer | None:
        got = await self._polled(scope, receive)
        if got is not None or scope["type"] != "http" or scope["method"] != "GET":
            return got
        found = TASK_READ.fullmatch(scope["path"])
        if found is None:
            return None
        scope.setdefault("route", self._task_route)
        scope["path_params"] = {"task_id": found.group(1)}
        request = Request(scope, receive)
        try:
            return await rest.get_task(found.group(1), request)
        except Exception as exc:
            answer = await handled(request, exc)
            if answer is None:
                raise
            return answer
