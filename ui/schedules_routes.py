"""Scheduled exports: the page `/schedules` (create, pause, resume, delete; next run, last task,
why stopped). The rules live in `desk.work.schedules`: staff and admins of the team use the page
(an admin sees every schedule of the team, staff their own); customers and people of no team get
exactly what an unknown address answers, as for the admins' pages (ui/admin_only.py). A
schedule one may not see answers like a missing one. "Save as schedule" on the tickets page
links here with its filters in the query."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from desk.core.errors import NotAllowed, NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.helpdesk.filters import parse_filter
from desk.work import schedules
from ui.admin_only import as_missing
from ui.render import fragment_or_page, is_htmx
from ui.route import UiRoute, redirect
from ui.tickets_routes import FILTER_KEYS, filter_input
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)

WEEKDAYS = (
    (1, "Monday"), (2, "Tuesday"), (3, "Wednesday"), (4, "Thursday"), (5, "Friday"),
    (6, "Saturday"), (7, "Sunday"),
)  # fmt: skip


def _team(v: Viewer) -> int | None:
    """The viewer's team when they are its staff or admin; None: answer as missing."""
    return v.team_id if v.team_id is not None and v.is_staff else None


def _describe(raw: dict[str, Any]) -> str:
    try:
        return parse_filter(raw).describe()
    except ValidationProblem:
        return ""


async def _answer(
    request: Request, rt: Runtime, v: Viewer, team: int, *, status: int = 200, **extra: Any
) -> Response:
    rows = await schedules.list_schedules(rt, v.user_id, team)
    if request.method == "POST" and not is_htmx(request) and status < 400:
        return redirect(request, "/schedules")
    form = extra.pop("form", None) or {}
    context = {
        "v": v, "schedules": rows, "weekdays": WEEKDAYS, "reason": schedules.reason_text,
        "describe": _describe, "form": form, "form_days": form.get("days", [1]),
        "form_filters": form.get("filters", {}), **extra,
    }  # fmt: skip
    return fragment_or_page(request, "schedules.html", context, "schedule_list", status=status)


@router.get("/schedules")
async def schedules_page(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := _team(v)) is None:
        return await as_missing(request)
    raw = filter_input({k: request.query_params.getlist(k) for k in FILTER_KEYS})
    form = {"filters": raw, "time": "08:00", "timezone": v.tz.key, "days": [1]}
    return await _answer(request, rt, v, team, form=form)


@router.post("/schedules")
async def create(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := _team(v)) is None:
        return await as_missing(request)
    data = await request.form()
    raw = filter_input({k: data.getlist(k) for k in FILTER_KEYS})
    days: list[object] = []
    for d in (str(x) for x in data.getlist("days")):
        days.append(int(d) if d.isascii() and d.isdecimal() and len(d) < 3 else d)
    form = {
        "filters": raw, "days": days, "time": str(data.get("time") or ""),
        "timezone": str(data.get("timezone") or ""), "name": str(data.get("name") or ""),
    }  # fmt: skip
    try:
        made = await schedules.create_schedule(
            rt, v.user_id, team, raw, days=days, time=form["time"],
            timezone=form["timezone"] or None, name=form["name"],
        )  # fmt: skip
    except (ValidationProblem, NotAllowed) as problem:
        status = 422 if isinstance(problem, ValidationProblem) else 403
        return await _answer(request, rt, v, team, status=status, problem=problem, form=form)
    return await _answer(request, rt, v, team, status=201, done="created", changed=made)


async def _act(request: Request, rt: Runtime, v: Viewer, schedule_id: int, action: str) -> Response:
    if (team := _team(v)) is None:
        return await as_missing(request)
    act = {
        "pause": schedules.pause_schedule,
        "resume": schedules.resume_schedule,
        "delete": schedules.delete_schedule,
    }[action]
    try:
        changed = await act(rt, v.user_id, schedule_id)
    except NotFound:
        return await as_missing(request)
    except NotAllowed as problem:
        return await _answer(request, rt, v, team, status=409, refused=problem.message)
    return await _answer(request, rt, v, team, done=action, changed=changed)


@router.post("/schedules/{schedule_id}/pause")
async def pause(request: Request, schedule_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    return await _act(request, rt, v, schedule_id, "pause")


@router.post("/schedules/{schedule_id}/resume")
async def resume(request: Request, schedule_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    return await _act(request, rt, v, schedule_id, "resume")


@router.post("/schedules/{schedule_id}/delete")
async def delete(request: Request, schedule_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    return await _act(request, rt, v, schedule_id, "delete")
