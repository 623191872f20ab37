"""The console's teams page (operators only): every team with its member count, and a form that
creates one and, given an address, invites its first admin — the link is shown once, as on the
members page. A team admin gets exactly what an unknown address answers, as everyone outside
the console does. The rule is desk.work.onboarding.create_team's, audited there."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from desk.core.errors import NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.people import teams
from desk.work import onboarding
from ui.console.pages import page_context
from ui.console.route import Console, ConsoleDep, ConsoleRoute
from ui.render import render
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)


async def _page(
    request: Request, rt: Runtime, c: Console, *, status: int = 200, **extra: Any
) -> Response:
    context = page_context(c, request, teams=await teams.list_all(rt), **extra)
    return render(request, "console/teams.html", context, status=status)


@router.get("/ops/teams")
async def teams_page(request: Request, rt: RuntimeDep, c: ConsoleDep) -> Response:
    if not c.scope.operator:
        raise NotFound()
    return await _page(request, rt, c)


@router.post("/ops/teams")
async def create_team(request: Request, rt: RuntimeDep, c: ConsoleDep) -> Response:
    if not c.scope.operator:
        raise NotFound()
    form = await request.form()
    name, admin = str(form.get("name") or ""), str(form.get("admin_email") or "").strip()
    try:
        created = await onboarding.create_team(rt, c.scope.user_id, name, admin or None)
    except ValidationProblem as problem:
        return await _page(request, rt, c, status=422, problem=problem, name=name, admin=admin)
    link = None
    if created.invitation is not None:
        link = onboarding.shown_link(str(request.base_url), created.invitation.path)
    return await _page(request, rt, c, status=201, created=created, link=link)
