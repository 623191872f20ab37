"""The console's route class and what every console page knows: the viewer and their scope.

The scope is settled before anything else, CSRF included, so that anyone outside it — signed
out, staff, customer, or the admin of another team asking for this team's task — gets exactly
the page an unknown address gets, whatever the method. Other domain errors become their 4xx
page as on every other page (`ui.route.error_page`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from desk.core.errors import DeskError, NotFound, ValidationProblem
from desk.people import operators
from desk.people.operators import Scope
from ui.route import error_page
from ui.viewer import LoginRequired, Viewer, page_viewer
from web import csrf
from web.auth import read_session
from web.errors import not_found

# A live block's timed poll (its hx-trigger). With /static/ops.js the block follows its change
# stream instead (ui.console.live) and polls only when the stream cannot be had, then at least
# every 10 s; this schedule is what a page without ops.js does.
LIVE_FAST = 3  # seconds between polls of a live block while someone is looking
LIVE_SLOW = 15  # after LIVE_FAST_FOR seconds of watching: still live, but cheaper
LIVE_FAST_FOR = 600


@dataclass
class Console:
    v: Viewer
    scope: Scope

    def context(self, **extra: Any) -> dict[str, Any]:
        return {"v": self.v, "scope": self.scope, **extra}


def live_delay(since: float | None) -> tuple[float, int]:
    """(since, seconds until the next poll): fast at first, slower after ten minutes, never off
    — an operator's screen stays live through an incident."""
    now = time.time()
    since = now if since is None or since > now else since
    return since, LIVE_FAST if now - since < LIVE_FAST_FOR else LIVE_SLOW


async def _console(request: Request) -> Console:
    rt = request.app.state.runtime
    if await read_session(rt, request) is None:
        raise NotFound()
    try:
        v = await page_viewer(request, rt)
    except LoginRequired:
        raise NotFound() from None
    return Console(v, await operators.scope_of(rt, v.user_id))


async def _not_found(request: Request) -> Response:
    """Exactly what an unknown address answers (web.errors.not_found): no header, no hints."""
    request.state.viewer = None
    return await not_found(request, HTTPException(404))


def _bad_input(exc: RequestValidationError) -> DeskError | None:
    """A 400 naming the query parameter; None for a malformed path (an unknown address)."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(p) for p in first.get("loc", ())]
    if loc and loc[0] == "path":
        return None
    problem = ValidationProblem(loc[-1] if loc else "input", str(first.get("msg", "invalid")))
    problem.http_status = 400
    return problem


class ConsoleRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                request.state.console = await _console(request)
                if request.method not in csrf.SAFE_METHODS:
                    await csrf.require_csrf(request.app.state.runtime, request)
                return await handler(request)
            except NotFound:
                return await _not_found(request)
            except RequestValidationError as exc:
                problem = _bad_input(exc)
                if problem is None:
                    return await _not_found(request)
                return error_page(request, problem)
            except DeskError as exc:
                return error_page(request, exc)

        return guarded


def _current(request: Request) -> Console:
    console: Console = request.state.console
    return console


ConsoleDep = Annotated[Console, Depends(_current)]
