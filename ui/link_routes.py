"""Pages people reach from an e-mailed link, before they can sign in: accepting an invitation
(`/invitations/<token>`), asking for a password reset (`/password/forgot`, linked from the sign-in
page) and using its link (`/password/reset/<token>`).

The rules are desk's (desk.people.invitations, desk.people.resets, desk.work.onboarding). A link
that is unknown answers 404, one used, expired or withdrawn 410, each with a page that says what
happened and what to do (ui.route.error_page) — never a 500. The forms carry their own CSRF token
(web.csrf.issue_form_token) or, for someone signed in, their session's.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from desk.core.errors import NotAllowed, ValidationProblem
from desk.people import invitations, resets, users
from desk.people.throttle import Throttled
from desk.work import onboarding
from ui import i18n
from ui.auth_routes import client_address
from ui.render import render
from ui.route import UiRoute, csrf_exempt, redirect
from ui.viewer import TEAM_COOKIE, login_url
from web import csrf
from web.auth import RuntimeDep, read_session, secure_cookies, start_session
from web.errors import retry_after_headers

router = APIRouter(route_class=UiRoute)


def _page(
    request: Request,
    template: str,
    token: str,
    *,
    status: int = 200,
    set_cookie: Response | None = None,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> Response:
    locale = i18n.pick(None, request.headers.get("accept-language"))
    page = render(
        request,
        template,
        {"v": None, "token": token, **context},
        status=status,
        headers=headers,
        locale=locale,
    )
    if set_cookie is not None:
        page.raw_headers.extend(h for h in set_cookie.raw_headers if h[0] == b"set-cookie")
    return page


async def _form_token(request: Request, rt: Any) -> tuple[str, Response]:
    """The CSRF token the page's form carries, and a response holding any cookie it needs."""
    holder = Response()
    session = await read_session(rt, request)
    if session is not None:
        return session.csrf, holder
    return csrf.issue_form_token(rt, request, holder), holder


async def _field(request: Request, name: str) -> str:
    value = (await request.form()).get(name)
    return value if isinstance(value, str) else ""


# --- Invitations ------------------------------------------------------------------------------


async def _invitation_page(
    request: Request, rt: Any, link: str, *, status: int = 200, **extra: Any
) -> Response:
    pending = await invitations.peek(rt, link)  # NotFound / LinkGone: their pages
    token, holder = await _form_token(request, rt)
    session = await read_session(rt, request)
    me = await users.get_user(rt, session.user_id) if session is not None else None
    context = {
        "invitation": pending.invitation,
        "has_account": pending.account_id is not None,
        "is_me": me is not None and me.id == pending.account_id,
        "me": me,
        "link": link,
        "login": login_url(request.url.path),
        **extra,
    }
    return _page(request, "invitation.html", token, status=status, set_cookie=holder, **context)


@router.get("/invitations/{link}")
async def invitation_page(request: Request, link: str, rt: RuntimeDep) -> Response:
    return await _invitation_page(request, rt, link)


@router.post("/invitations/{link}")
@csrf_exempt
async def accept_invitation(request: Request, link: str, rt: RuntimeDep) -> Response:
    """Accept, sign the person in (a new account; an existing one is signed in already) and
    land them on the workspace of the team they joined."""
    await csrf.require_form_csrf(rt, request)
    session = await read_session(rt, request)
    name = await _field(request, "display_name")
    try:
        done = await invitations.accept(
            rt,
            link,
            display_name=name,
            password=await _field(request, "password"),
            user_id=session.user_id if session is not None else None,
        )
    except (ValidationProblem, NotAllowed) as problem:
        return await _invitation_page(
            request, rt, link, status=problem.http_status, problem=problem, name=name
        )
    response = redirect(request, "/tickets")
    if session is None or session.user_id != done.user_id:
        await start_session(rt, response, done.user_id)
    response.set_cookie(
        TEAM_COOKIE,
        str(done.team_id),
        max_age=365 * 24 * 3600,
        samesite="lax",
        path="/",
        httponly=True,
        secure=secure_cookies(rt),
    )
    return response


# --- Password reset ---------------------------------------------------------------------------


@router.get("/password/forgot")
async def forgot_page(request: Request, rt: RuntimeDep) -> Response:
    token, holder = await _form_token(request, rt)
    return _page(request, "password_forgot.html", token, set_cookie=holder, email="")


@router.post("/password/forgot")
@csrf_exempt
async def forgot(request: Request, rt: RuntimeDep) -> Response:
    """The same page whether or not an account uses the address (desk.people.resets)."""
    await csrf.require_form_csrf(rt, request)
    email = (await _field(request, "email"))[:20_000]
    token, holder = await _form_token(request, rt)
    try:
        await onboarding.request_password_reset(rt, email, client_address(request))
    except ValidationProblem as problem:
        return _page(
            request, "password_forgot.html", token, status=422, problem=problem, email=email
        )
    except Throttled as exc:
        headers = retry_after_headers(request, exc)
        return _page(
            request,
            "password_forgot.html",
            token,
            status=429,
            headers=headers,
            throttled=exc,
            email=email,
        )
    return _page(request, "password_forgot.html", token, set_cookie=holder, sent=True, email="")


@router.get("/password/reset/{link}")
async def reset_page(request: Request, link: str, rt: RuntimeDep) -> Response:
    await resets.check(rt, link)  # NotFound / LinkGone: their pages
    token, holder = await _form_token(request, rt)
    return _page(request, "password_reset.html", token, set_cookie=holder, link=link)


@router.post("/password/reset/{link}")
@csrf_exempt
async def reset(request: Request, link: str, rt: RuntimeDep) -> Response:
    await csrf.require_form_csrf(rt, request)
    token, _holder = await _form_token(request, rt)
    password, again = await _field(request, "password"), await _field(request, "again")
    try:
        if password != again:
            raise ValidationProblem("again", "the two passwords differ")
        done = await resets.reset(rt, link, password)
    except ValidationProblem as problem:
        return _page(request, "password_reset.html", token, status=422, problem=problem, link=link)
    return _page(request, "password_reset.html", "", done=done, link=link)
