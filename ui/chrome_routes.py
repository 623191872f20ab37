"""What every page's header polls: the notification bell (every 5 s, and when a task finishes),
the notifications page with mark-read, and the health badge (every 10 s) that warns when no
worker is alive."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from desk.console import health
from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.helpdesk import notifications
from desk.reads import tasks as reads
from desk.reads.bell import toast_for
from ui.render import fragment_or_page, is_htmx, render
from ui.route import UiRoute, redirect
from ui.viewer import BellViewer, FragmentViewer, PageViewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)


@router.get("/notifications/badge")
async def bell(request: Request, rt: RuntimeDep, v: BellViewer, seen: int = -1) -> Response:
    """The unread count; when it grew since the last poll (`seen`), the newest one as a toast."""
    unread = v.unread if v.unread is not None else await reads.unread_count(rt.pg, v.user_id)
    toast = await toast_for(rt.pg, v.user_id, seen, unread)
    return render(request, "base.html", {"v": v, "unread": unread, "toast": toast}, block="bell")


@router.get("/notifications")
async def notifications_page(
    request: Request, rt: RuntimeDep, v: PageViewer, after: str | None = None
) -> Response:
    page = await notifications.list_notifications(rt, v.user_id, first=30, after=after)
    return fragment_or_page(
        request, "notifications.html", {"v": v, "page": page}, "notification_list"
    )


@router.post("/notifications/read")
async def mark_read(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    """Mark one (`id`) or all of my notifications read; the list and the bell refresh."""
    form = await request.form()
    ids = [inputs.optional_id(x) for x in form.getlist("id")]
    if None in ids:
        raise ValidationProblem("id", "not a notification of yours")
    await notifications.mark_read(rt, v.user_id, [i for i in ids if i is not None] or None)
    if not is_htmx(request):
        return redirect(request, "/notifications")
    page = await notifications.list_notifications(rt, v.user_id, first=30)
    return render(
        request,
        "notifications.html",
        {"v": v, "page": page},
        block="notification_list",
        headers={"HX-Trigger": "notifications-changed"},
    )


@router.get("/health/badge")
async def health_badge(request: Request, rt: RuntimeDep, v: FragmentViewer) -> Response:
    report = await health.check(rt)
    return render(request, "base.html", {"v": v, "health": report}, block="health")
