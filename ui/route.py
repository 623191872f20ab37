"""The route class of every page: CSRF on state changes, and errors as pages, never a 500.

Any DeskError becomes its 4xx page (or, for htmx, a fragment the browser shows in place), a
missing session a trip to the sign-in page that comes back afterwards, and a malformed path or
query a 404/400 page. Endpoints marked with `csrf_exempt` (sign-in) check their own token.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from desk.core.errors import DeskError, NotFound, Unauthenticated, ValidationProblem
from desk.people import throttle
from ui.render import is_htmx, render
from ui.viewer import LoginRequired, login_url, same_site_path, viewer_for_error
from web import csrf
from web.auth import read_session
from web.errors import retry_after_headers

F = TypeVar("F", bound=Callable[..., Any])


def csrf_exempt(endpoint: F) -> F:
    """Mark an endpoint that checks its own CSRF token (sign-in has no session yet)."""
    endpoint.csrf_exempt = True  # type: ignore[attr-defined]
    return endpoint


def uncounted(endpoint: F) -> F:
    """Mark a post that is not a change to budget (signing out must work when rate-limited)."""
    endpoint.uncounted = True  # type: ignore[attr-defined]
    return endpoint


_ASCII = "".join(map(chr, range(0x20, 0x7F)))  # printable ASCII, `%` included: kept as given


def redirect(request: Request, url: str) -> Response:
    """A 303 for a browser, an `HX-Redirect` for htmx (which would otherwise swap the page in).
    Only ever to a path on this site: anything else goes to the tickets."""
    if not same_site_path(url):
        url = "/tickets"
    if is_htmx(request):
        # A header is latin-1: non-ASCII (`/tickets?q=日本`) goes percent-encoded as UTF-8, as
        # RedirectResponse does for Location, instead of failing to encode (a 500).
        return Response(status_code=204, headers={"HX-Redirect": quote(url, safe=_ASCII)})
    return RedirectResponse(url, status_code=303)


def error_page(
    request: Request, exc: DeskError, extra: Mapping[str, str] | None = None
) -> Response:
    """The error's own status and message; htmx gets just the message block. `extra` headers
    come last (`Allow` on a 405). Every error a browser gets is this page (web/errors.py)."""
    context = {
        "error": exc,
        "field": getattr(exc, "field", None),
        "v": getattr(request.state, "viewer", None),
    }
    headers = retry_after_headers(request, exc)
    if not is_htmx(request):
        headers |= extra or {}
        return render(request, "error.html", context, status=exc.http_status, headers=headers)
    # Shown in the page's alert area, whatever element asked (its own content stays).
    headers |= {"HX-Retarget": "#flash", "HX-Reswap": "innerHTML"} | dict(extra or {})
    return render(
        request, "error.html", context, block="message", status=exc.http_status, headers=headers
    )


def _validation(exc: RequestValidationError) -> DeskError:
    """A malformed id in the path is a thing that does not exist; other bad input is a 400."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    loc = [str(p) for p in first.get("loc", ())]
    if loc and loc[0] == "path":
        return NotFound()
    problem = ValidationProblem(loc[-1] if loc else "input", str(first.get("msg", "invalid")))
    problem.http_status = 400
    return problem


def _unreadable(exc: HTTPException) -> DeskError:
    """Starlette's own refusals while parsing a form (a part over its size, too many fields,
    malformed multipart): the page's message, never its JSON."""
    problem = ValidationProblem("form", str(exc.detail or "the form could not be read"))
    problem.http_status = exc.status_code if 400 <= exc.status_code < 500 else 400
    return problem


async def _count_change(request: Request) -> None:
    """Page form posts share the GraphQL mutations' per-user budget (one desk rule)."""
    rt = request.app.state.runtime
    session = await read_session(rt, request)
    if session is not None:
        await throttle.count_change(rt, session.user_id)


def refused_page(request: Request, exc: Exception) -> Response | None:
    """What a page's route answers for `exc`: a trip to sign in, or the error's page; None for
    anything that is not a page's refusal (the app's own handlers, or its 500, take it)."""
    if isinstance(exc, LoginRequired | Unauthenticated):
        next_url = exc.next_url if isinstance(exc, LoginRequired) else "/tickets"
        return redirect(request, login_url(next_url))
    if isinstance(exc, RequestValidationError):
        return error_page(request, _validation(exc))
    if isinstance(exc, DeskError):
        return error_page(request, exc)
    if isinstance(exc, HTTPException) and exc.status_code in (400, 413):
        return error_page(request, _unreadable(exc))
    return None


class UiRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        exempt = getattr(self.endpoint, "csrf_exempt", False)
        counted = not getattr(self.endpoint, "uncounted", False)

        async def guarded(request: Request) -> Response:
            try:
                if request.method not in csrf.SAFE_METHODS and not exempt:
                    await csrf.require_csrf(request.app.state.runtime, request)
                    if counted:
                        await _count_change(request)
                return await handler(request)
            except Exception as exc:
                if isinstance(exc, RequestValidationError):
                    # A route that reads its viewer itself (the ticket page, with its page) had
                    # not come to it: the error page still shows the reader's header.
                    await viewer_for_error(request)
                answer = refused_page(request, exc)
                if answer is None:
                    raise
                return answer

        return guarded
