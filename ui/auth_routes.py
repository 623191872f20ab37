"""Sign-in and out, and the team switcher. After signing in, people land where they were going
(`next`, only ever a path on this site).

Failed sign-ins are throttled per account and client address, per account and per address
(desk.people.throttle, shared through Redis; successes do not count) before any password is
checked; a throttled form says how long to wait, with 429 and `Retry-After`. Signing out revokes the session server-side, so a copied cookie stops working.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from desk.core.errors import NotFound
from desk.people import throttle, users
from ui import i18n
from ui.render import render
from ui.route import UiRoute, csrf_exempt, redirect, uncounted
from ui.viewer import TEAM_COOKIE, PageViewer, safe_next
from web import csrf
from web.auth import RuntimeDep, end_session, read_session, secure_cookies, start_session

router = APIRouter(route_class=UiRoute)


@router.get("/login")
async def login_form(request: Request, rt: RuntimeDep, next: str = "/tickets") -> Response:
    if await read_session(rt, request) is not None:
        return redirect(request, safe_next(next))
    response = Response()
    token = csrf.issue_login_token(rt, request, response)
    page = _login_page(request, token, safe_next(next), email="", failed=False)
    page.raw_headers.extend(h for h in response.raw_headers if h[0] == b"set-cookie")
    return page


def _login_page(
    request: Request,
    token: str,
    next_url: str,
    *,
    email: str,
    failed: bool,
    throttled: throttle.LoginThrottled | None = None,
) -> Response:
    locale = i18n.pick(None, request.headers.get("accept-language"))
    context = {
        "v": None,
        "token": token,
        "next": next_url,
        "email": email,
        "failed": failed,
        "throttled": throttled,
    }
    if throttled is not None:
        headers = {"Retry-After": str(throttled.retry_after_seconds)}
        return render(request, "login.html", context, status=429, headers=headers, locale=locale)
    return render(request, "login.html", context, status=401 if failed else 200, locale=locale)


def client_address(request: Request) -> str:
    # The peer as uvicorn reports it (behind a proxy, run uvicorn with --forwarded-allow-ips).
    return request.client.host if request.client else "unknown"


@router.post("/login")
@csrf_exempt
async def login(request: Request, rt: RuntimeDep) -> Response:
    await csrf.require_login_csrf(rt, request)
    form = await request.form()
    email, password = str(form.get("email") or "")[:320], str(form.get("password") or "")
    next_url = safe_next(str(form.get("next") or ""))
    token = str(form.get(csrf.FIELD) or "")
    address = client_address(request)
    try:
        attempt = await throttle.login_attempt(rt, email, address)
    except throttle.LoginThrottled as exc:
        return _login_page(request, token, next_url, email=email, failed=False, throttled=exc)
    user = await users.authenticate(rt, email, password)
    if user is None or user.id is None:
        return _login_page(request, token, next_url, email=email, failed=True)
    await throttle.login_succeeded(rt, attempt)
    response = redirect(request, next_url)
    await start_session(rt, response, user.id)
    response.delete_cookie(
        csrf.LOGIN_COOKIE, path="/login", secure=secure_cookies(rt), httponly=True, samesite="lax"
    )
    return response


@router.post("/logout")
@uncounted
async def logout(request: Request, rt: RuntimeDep) -> Response:
    response = redirect(request, "/login")
    await end_session(rt, request, response)
    return response


@router.post("/team")
async def switch_team(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    """Work in another of my teams; a team I am not in does not exist."""
    form = await request.form()
    raw = str(form.get("team_id") or "")
    if not (raw.isascii() and raw.isdigit() and len(raw) < 10) or int(raw) not in {
        t.team_id for t in v.teams
    }:
        raise NotFound("Team not found.")
    response = redirect(request, safe_next(str(form.get("next") or "/tickets")))
    response.set_cookie(
        TEAM_COOKIE,
        raw,
        max_age=365 * 24 * 3600,
        samesite="lax",
        path="/",
        httponly=True,
        secure=secure_cookies(rt),
    )
    return response
