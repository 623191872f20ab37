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

from api import csrf
from api.auth import read_session
from desk import operators
from desk.errors import DeskError, NotFound
from desk.operators import Scope
from ui.route import _validation, error_page
from ui.viewer import LoginRequired, Viewer, _viewer, load_teams

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
    if read_session(rt, request) is None:
        raise NotFound()
    try:
        v = await _viewer(rt, request)
    except LoginRequired:
        raise NotFound() from None
    scope = await operators.scope_of(rt, v.user_id)
    return Console(await load_teams(rt, v), scope)


async def _not_found(request: Request) -> Response:
    """Exactly what an unknown address answers (ui.not_found): no header, no hints."""
    from ui import not_found

    request.state.viewer = None
    return await not_found(request, HTTPException(404))


class OpsRoute(APIRoute):
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
                problem = _validation(exc)
                if isinstance(problem, NotFound):
                    return await _not_found(request)
                return error_page(request, problem)
            except DeskError as exc:
                return error_page(request, exc)

        return guarded


def _current(request: Request) -> Console:
    console: Console = request.state.console
    return console


ConsoleDep = Annotated[Console, Depends(_current)]
