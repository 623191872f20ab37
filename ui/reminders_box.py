"""The reminder box on a ticket (staff only): presets, a custom time in the user's timezone, the
pending reminder with Cancel, and recent reminders — skipped ones say why.

`desk.work.reminders` owns every rule (who may, supersede, double click); this module turns the
buttons into a due time and renders the box again.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response

from desk.core.clock import arrived_at
from desk.core.errors import TaskConflict, ValidationProblem
from desk.core.models import CLOSED_TICKET, TaskKind, Ticket
from desk.core.runtime import Runtime
from desk.helpdesk import tickets
from desk.reads import tasks as reads
from desk.reads.tasks import TaskPage
from desk.work import reminders
from ui import taskview
from ui.render import is_htmx, render
from ui.route import UiRoute, redirect
from ui.taskview import Task
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)
PRESET_MINUTES = {"1m": 1, "1h": 60}
HISTORY = 5


def due_time(preset: str, custom: str, v: Viewer, now: datetime) -> dict[str, Any]:
    """Keyword arguments for `schedule_reminder`: in N minutes, or a time in the user's zone."""
    if preset in PRESET_MINUTES:
        return {"in_minutes": PRESET_MINUTES[preset]}
    if preset == "tomorrow9":
        tomorrow = now.astimezone(v.tz).date() + timedelta(days=1)
        return {"at": datetime.combine(tomorrow, time(9, 0), tzinfo=v.tz)}
    if preset == "custom":
        try:
            local = datetime.fromisoformat(custom.strip())
        except ValueError:
            raise ValidationProblem("at", "pick a date and time") from None
        if local.tzinfo is None:
            local = local.replace(tzinfo=v.tz)  # what the person typed is their own local time
        return {"at": local}
    raise ValidationProblem("preset", "choose when to be reminded")


async def reminders_context(rt: Runtime, v: Viewer, ticket: Ticket) -> dict[str, Any]:
    """The pending reminder and the last few for this ticket, as task rows."""
    assert ticket.id is not None
    pending = await reminders.pending_reminder(rt, v.user_id, ticket.id)
    recent = await reads.list_tasks(
        rt.pg,
        v.user_id,
        ticket.team_id,
        kind=TaskKind.REMINDER,
        ticket_id=ticket.id,
        first=HISTORY + 1,
    )
    return reminders_of(v, ticket, pending, recent, rt.clock())


def reminders_of(
    v: Viewer, ticket: Ticket, pending: Task | None, recent: TaskPage, now: datetime
) -> dict[str, Any]:
    """`reminders_context` from the pending reminder and the ticket's latest ones, read already."""
    mine = [t for t in recent.items if t.id != (pending and pending.id)]
    return {
        "pending": (
            taskview.build(pending, viewer_id=v.user_id, now=now, ticket_title=ticket.title)
            if pending
            else None
        ),
        "history": [
            taskview.build(t, viewer_id=v.user_id, now=now, ticket_title=ticket.title)
            for t in mine[:HISTORY]
        ],
        "closed": ticket.status in CLOSED_TICKET,
    }


async def _answer(
    request: Request,
    rt: Runtime,
    v: Viewer,
    ticket_id: int,
    *,
    status: int = 200,
    note: str | None = None,
    problem: ValidationProblem | None = None,
) -> Response:
    if not is_htmx(request):
        return redirect(request, f"/tickets/{ticket_id}")
    ticket = await tickets.get_ticket(rt, v.user_id, ticket_id)
    context = {"v": v, "ticket": ticket, "is_staff": True, "note": note, "problem": problem}
    context |= await reminders_context(rt, v, ticket)
    return render(request, "ticket.html", context, block="reminders", status=status)


@router.post("/tickets/{ticket_id}/reminder")
async def schedule(request: Request, ticket_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    form = await request.form()
    preset, custom = str(form.get("preset") or ""), str(form.get("at") or "")
    text = str(form.get("note") or "")
    key = str(form.get("idempotency_key") or "") or None  # the rendered form's: one request
    try:
        arrived = arrived_at(request, rt.clock)  # judged by when it was asked (issue 11)
        when = due_time(preset, custom, v, arrived)
        await reminders.schedule_reminder(
            rt, v.user_id, ticket_id, note=text, idempotency_key=key, arrived_at=arrived, **when
        )
    except TaskConflict:
        return await _answer(request, rt, v, ticket_id, status=409, note="same")
    except ValidationProblem as problem:
        return await _answer(request, rt, v, ticket_id, status=422, problem=problem)
    return await _answer(request, rt, v, ticket_id, note="scheduled")


@router.post("/tickets/{ticket_id}/reminder/cancel")
async def cancel(request: Request, ticket_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    await reminders.cancel_reminder(rt, v.user_id, ticket_id)
    return await _answer(request, rt, v, ticket_id, note="cancelled")
