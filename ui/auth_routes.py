"""Sign-in and out, and the team switcher. After signing in, people land where they were going
(`next`, only ever a path on this site)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from api import csrf
from api.auth import RuntimeDep, end_session, read_session, start_session
from desk import users
from desk.errors import NotFound
from ui import i18n
from ui.render import render
from ui.route import UiRoute, csrf_exempt, redirect
from ui.viewer import TEAM_COOKIE, PageViewer, safe_next

router = APIRouter(route_class=UiRoute)


@router.get("/login")
async def login_form(request: Request, rt: RuntimeDep, next: str = "/tickets") -> Response:
    if read_session(rt, request) is not None:
        return redirect(request, safe_next(next))
    response = Response()
    token = csrf.issue_login_token(rt, request, response)
    page = _login_page(request, token, safe_next(next), email="", failed=False)
    page.raw_headers.extend(h for h in response.raw_headers if h[0] == b"set-cookie")
    return page


def _login_page(
    request: Request, token: str, next_url: str, *, email: str, failed: bool
) -> Response:
    locale = i18n.pick(None, request.headers.get("accept-language"))
    context = {"v": None, "token": token, "next": next_url, "email": email, "failed": failed}
    return render(request, "login.html", context, status=401 if failed else 200, locale=locale)


@router.post("/login")
@csrf_exempt
async def login(request: Request, rt: RuntimeDep) -> Response:
    await csrf.require_login_csrf(rt, request)
    form = await request.form()
    email, password = str(form.get("email") or ""), str(form.get("password") or "")
    next_url = safe_next(str(form.get("next") or ""))
    user = await users.authenticate(rt, email, password)
    if user is None or user.id is None:
        token = str(form.get(csrf.FIELD) or "")
        return _login_page(request, token, next_url, email=email, failed=True)
    response = redirect(request, next_url)
    start_session(rt, response, user.id)
    response.delete_cookie(csrf.LOGIN_COOKIE, path="/login")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    response = redirect(request, "/login")
    end_session(response)
    return response


@router.post("/team")
async def switch_team(request: Request, v: PageViewer) -> Response:
    """Work in another of my teams; a team I am not in does not exist."""
    form = await request.form()
    raw = str(form.get("team_id") or "")
    if not raw.isdigit() or int(raw) not in {t.team_id for t in v.teams}:
        raise NotFound("Team not found.")
    response = redirect(request, safe_next(str(form.get("next") or "/tickets")))
    response.set_cookie(TEAM_COOKIE, raw, max_age=365 * 24 * 3600, samesite="lax", path="/")
    return response
