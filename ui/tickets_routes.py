"""Tickets: the workspace list (filters in the URL, keyset paging, counts), a ticket's page with
its status/priority/assignee form, and creating a ticket. Customers see only their own tickets —
`desk.helpdesk.tickets` decides that, the page only shows what it is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.core.models import Priority, Role, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import filters, tickets
from ui import task_lists
from ui.reminders_box import reminders_context
from ui.render import fragment_or_page, is_htmx, render
from ui.route import UiRoute, redirect
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)
PAGE = 25
FILTER_KEYS = ("status", "priority", "assignment", "assignee_id", "q")


def filter_input(values: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """Form or query values → the raw dict `desk.helpdesk.filters.parse_filter` validates."""
    raw: dict[str, Any] = {}
    for key in FILTER_KEYS:
        items = [str(x) for x in values.get(key, []) if str(x).strip()]
        if not items:
            continue
        raw[key] = items if key in ("status", "priority") else items[-1]
    # The assignee picker offers people as "user:<id>" next to anyone/me/unassigned.
    assignment = str(raw.get("assignment", ""))
    if assignment.startswith("user:"):
        raw["assignment"], raw["assignee_id"] = "user", assignment[5:]
    return raw


async def _staff(rt: Runtime, v: Viewer, team_id: int) -> list[tuple[int, str]]:
    """Who tickets can be assigned to (and filtered by)."""
    members = await tickets.team_members(rt, v.user_id, team_id)
    return [(uid, name) for uid, name, _email, role in members if role != Role.CUSTOMER]


@router.get("/")
async def home(request: Request) -> Response:
    return redirect(request, "/tickets")


@router.get("/tickets")
async def ticket_list(
    request: Request,
    rt: RuntimeDep,
    v: PageViewer,
    after: str | None = None,
    start: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    team_id = v.require_team()
    raw = filter_input({k: request.query_params.getlist(k) for k in FILTER_KEYS})
    f = filters.parse_filter(raw)
    page = await tickets.list_tickets(rt, v.user_id, team_id, f, first=PAGE, after=after)
    context = {
        "v": v,
        "f": f,
        "page": page,
        "start": start,
        "query": [
            (k, x) for k, vals in raw.items() for x in ([vals] if isinstance(vals, str) else vals)
        ],
        "statuses": list(TicketStatus),
        "priorities": list(Priority),
        "staff": await _staff(rt, v, team_id) if v.is_staff else [],
        "listing": None,
    }
    if not is_htmx(request):
        context["listing"] = await task_lists.task_list(
            rt, v.user_id, team_id, limit=task_lists.PANEL_SIZE
        )
    return fragment_or_page(request, "tickets.html", context, "ticket_list")


@router.get("/tickets/new")
async def new_ticket(request: Request, v: PageViewer) -> Response:
    v.require_team()
    return render(request, "ticket_new.html", {"v": v, "values": {}, "priorities": list(Priority)})


@router.post("/tickets")
async def create_ticket(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    team_id = v.require_team()
    form = await request.form()
    values = {k: str(form.get(k) or "") for k in ("title", "body", "priority")}
    try:
        ticket = await tickets.create_ticket(
            rt, v.user_id, team_id, values["title"], values["body"], values["priority"] or "NORMAL"
        )
    except ValidationProblem as problem:
        context = {"v": v, "values": values, "problem": problem, "priorities": list(Priority)}
        block = "ticket_form" if is_htmx(request) else None
        return render(request, "ticket_new.html", context, block=block, status=422)
    return redirect(request, f"/tickets/{ticket.id}")


async def _ticket_context(rt: Runtime, v: Viewer, ticket_id: int) -> dict[str, Any]:
    ticket = await tickets.get_ticket(rt, v.user_id, ticket_id)
    members = await tickets.team_members(rt, v.user_id, ticket.team_id)
    names = {uid: name for uid, name, _e, _r in members}
    staff = [(uid, name) for uid, name, _e, role in members if role != Role.CUSTOMER]
    # The ticket's own team decides the role here, not the team picked in the header.
    role = next((Role(r) for uid, _n, _e, r in members if uid == v.user_id), None)
    context: dict[str, Any] = {
        "v": v,
        "ticket": ticket,
        "names": names,
        "staff": staff,
        "is_staff": role is not None and role.is_staff,
        "statuses": list(TicketStatus),
        "priorities": list(Priority),
    }
    if context["is_staff"]:
        context |= await reminders_context(rt, v, ticket)
    return context


@router.get("/tickets/{ticket_id}")
async def ticket_page(request: Request, ticket_id: int, rt: RuntimeDep, v: PageViewer) -> Response:
    context = await _ticket_context(rt, v, ticket_id)
    fragments = {"reminders": "reminders", "ticket-fields": "fields"}
    block = fragments.get(request.headers.get("hx-target", ""), "fields")
    return fragment_or_page(request, "ticket.html", context, block)


def _assignee(value: str) -> int | None:
    if not value:
        return None  # "nobody"
    assignee = inputs.optional_id(value)
    if assignee is None:
        raise ValidationProblem("assignee", "pick a member of the team")
    return assignee


@router.post("/tickets/{ticket_id}")
async def update_ticket(
    request: Request, ticket_id: int, rt: RuntimeDep, v: PageViewer
) -> Response:
    """Staff change status, priority and assignee; the fields block comes back (with the error)."""
    form = await request.form()
    changes: dict[str, Any] = {}
    for key in ("status", "priority"):
        if form.get(key):
            changes[key] = str(form.get(key))
    status, problem, saved = 200, None, False
    try:
        if "assignee_id" in form:
            changes["assignee_id"] = _assignee(str(form.get("assignee_id") or ""))
        await tickets.update_ticket(rt, v.user_id, ticket_id, **changes)
        saved = True
    except ValidationProblem as exc:
        status, problem = 422, exc
    context = await _ticket_context(rt, v, ticket_id)
    context |= {"problem": problem, "saved": saved}
    if not is_htmx(request):
        return redirect(request, f"/tickets/{ticket_id}")
    return render(request, "ticket.html", context, block="fields", status=status)
