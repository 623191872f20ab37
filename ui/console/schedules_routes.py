"""The console's scheduled exports: every schedule of the teams in scope (state, next run, last
export, why stopped), optionally one team's (`?team=`), and Pause (audited). The rules are in
`desk.console.schedules`; who sees the console at all is `ui.console.route`'s."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from desk.console import schedules as console_schedules
from desk.helpdesk.filters import parse_filter
from desk.work import schedules
from ui.console.pages import page_context
from ui.console.route import ConsoleDep, ConsoleRoute
from ui.render import render
from ui.route import redirect
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)


@router.get("/ops/schedules")
async def schedules_page(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    team: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
) -> Response:
    rows = await console_schedules.in_scope(rt, c.scope, team)
    context = page_context(
        c, request, schedules=rows, team=team, reason=schedules.reason_text,
        describe=lambda raw: parse_filter(raw).describe(),
    )  # fmt: skip
    return render(request, "console/schedules.html", context)


@router.post("/ops/schedules/{schedule_id}/pause")
async def pause(request: Request, schedule_id: int, rt: RuntimeDep, c: ConsoleDep) -> Response:
    paused = await console_schedules.pause(rt, c.scope, schedule_id)
    return redirect(request, f"/ops/schedules?team={paused.team_id}")
