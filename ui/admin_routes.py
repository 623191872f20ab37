"""Admin pages: the team's members (invite by e-mail — the new link is shown once —, pending
invitations and withdrawing them, add an existing account, change role, remove) and the admin's API
tokens (create — shown once —, list, revoke). The rules live in `desk.people.members` and
`desk.people.users`; anyone but the team's admins gets exactly what an unknown address answers
(`ui.admin_only`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from desk.core.errors import ValidationProblem
from desk.core.models import Role
from desk.core.runtime import Runtime
from desk.people import invitations, members, users
from desk.work import onboarding
from ui.admin_only import admin_team, as_missing
from ui.render import fragment_or_page, is_htmx, render
from ui.route import UiRoute, redirect
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)


async def _members_answer(
    request: Request, rt: Runtime, v: Viewer, team_id: int, *, status: int = 200, **extra: Any
) -> Response:
    rows = await members.list_members(rt, v.user_id, team_id)
    pending = await invitations.list_pending(rt, v.user_id, team_id)
    context = {"v": v, "members": rows, "roles": list(Role), "pending": pending, **extra}
    # A plain form post that worked goes back to the page; one that did not shows its form.
    # A new invitation's link is in this one answer only, so that page is shown, not redirected.
    if request.method == "POST" and not is_htmx(request) and status < 400 and "link" not in extra:
        return redirect(request, "/members")
    return fragment_or_page(request, "members.html", context, "member_list", status=status)


@router.get("/members")
async def members_page(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    return await _members_answer(request, rt, v, team)


@router.post("/members")
async def add(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    form = await request.form()
    email, role = str(form.get("email") or ""), str(form.get("role") or "STAFF")
    try:
        added = await members.add_member(rt, v.user_id, team, email, role)
    except ValidationProblem as problem:
        return await _members_answer(
            request, rt, v, team, status=422, problem=problem, email=email, role=role
        )
    return await _members_answer(request, rt, v, team, done=f"added:{added.display_name}")


@router.post("/members/{member_id}/role")
async def change_role(request: Request, member_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    form = await request.form()
    try:
        await members.change_role(rt, v.user_id, team, member_id, str(form.get("role") or ""))
    except ValidationProblem as problem:
        return await _members_answer(request, rt, v, team, status=422, problem=problem)
    return await _members_answer(request, rt, v, team, done="role")


@router.post("/members/{member_id}/remove")
async def remove(request: Request, member_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    try:
        gone = await members.remove_member(rt, v.user_id, team, member_id)
    except ValidationProblem as problem:
        return await _members_answer(request, rt, v, team, status=422, problem=problem)
    return await _members_answer(request, rt, v, team, done=f"removed:{gone.display_name}")


@router.post("/members/invitations")
async def invite(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    form = await request.form()
    email, role = str(form.get("email") or ""), str(form.get("role") or "STAFF")
    try:
        new = await onboarding.invite_member(rt, v.user_id, team, email, role)
    except ValidationProblem as problem:
        return await _members_answer(
            request, rt, v, team, status=422, invite_problem=problem, invite_email=email, role=role
        )
    link = onboarding.shown_link(str(request.base_url), new.path)
    return await _members_answer(
        request, rt, v, team, status=201, link=link, invited=new.invitation
    )


@router.post("/members/invitations/{invitation_id}/revoke")
async def revoke_invitation(
    request: Request, invitation_id: int, rt: RuntimeDep, v: PageViewer
) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    try:
        gone = await invitations.revoke(rt, v.user_id, invitation_id)
    except ValidationProblem as problem:
        return await _members_answer(request, rt, v, team, status=422, problem=problem)
    return await _members_answer(request, rt, v, team, done=f"withdrawn:{gone.email}")


async def _tokens_answer(
    request: Request, rt: Runtime, v: Viewer, *, status: int = 200, **extra: Any
) -> Response:
    rows = await users.list_tokens(rt, v.user_id)
    context = {"v": v, "tokens": rows, "now": rt.clock(), **extra}
    if request.method == "POST" and not is_htmx(request) and status < 400 and "secret" not in extra:
        return redirect(request, "/tokens")
    block = "token_list" if is_htmx(request) else None
    return render(request, "tokens.html", context, block=block, status=status)


@router.get("/tokens")
async def tokens_page(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if await admin_team(rt, v) is None:
        return await as_missing(request)
    return await _tokens_answer(request, rt, v)


@router.post("/tokens")
async def create_token(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    """The token itself is in this one answer and nowhere else, ever."""
    if await admin_team(rt, v) is None:
        return await as_missing(request)
    form = await request.form()
    name = str(form.get("name") or "")
    try:
        row, secret = await users.create_token(rt, v.user_id, name)
    except ValidationProblem as problem:
        return await _tokens_answer(request, rt, v, status=422, problem=problem, name=name)
    return await _tokens_answer(request, rt, v, status=201, secret=secret, created=row)


@router.post("/tokens/{token_id}/revoke")
async def revoke_token(request: Request, token_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    if await admin_team(rt, v) is None:
        return await as_missing(request)
    revoked = await users.revoke_token(rt, v.user_id, token_id)
    return await _tokens_answer(request, rt, v, revoked=revoked)
