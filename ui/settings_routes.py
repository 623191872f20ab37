"""Your notification settings: which news also comes by e-mail (desk/people/preferences.py).
Only ever the signed-in person's own: the page takes no user, so nobody can reach another's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from desk.core.errors import ValidationProblem
from desk.core.runtime import Runtime
from desk.people import preferences
from ui.render import fragment_or_page, is_htmx
from ui.route import UiRoute, redirect
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)
PATH = "/settings/notifications"
CHOICES = ("export_ready_email", "reminder_email", "sla_email")
# What a checkbox sends when ticked (browsers: "on"); absent means unticked.
TICKED = {"on", "1", "true", "yes"}


async def _answer(
    request: Request, rt: Runtime, v: Viewer, *, status: int = 200, **extra: Any
) -> Response:
    if request.method == "POST" and not is_htmx(request) and status < 400:
        return redirect(request, PATH + "?saved=1")
    prefs = extra.pop("prefs", None) or await preferences.get(rt, v.user_id)
    saved = extra.pop("saved", request.query_params.get("saved") == "1")
    context = {"v": v, "prefs": prefs, "saved": saved, **extra}
    return fragment_or_page(request, "settings.html", context, "preference_form", status=status)


@router.get(PATH)
async def settings_page(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    return await _answer(request, rt, v)


def _choice(form: Any, name: str) -> bool:
    values = form.getlist(name)
    if len(values) > 1 or any(str(x).lower() not in TICKED for x in values):
        raise ValidationProblem(name, "tick the box or leave it empty")
    return bool(values)


@router.post(PATH)
async def save(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    form = await request.form()
    try:
        wanted = {name: _choice(form, name) for name in CHOICES}
        prefs = await preferences.set_mine(rt, v.user_id, **wanted)
    except ValidationProblem as problem:
        return await _answer(request, rt, v, status=422, problem=problem)
    return await _answer(request, rt, v, prefs=prefs, saved=True)
