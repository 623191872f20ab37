"""Tickets: the workspace list (filters in the URL, keyset paging, counts), a ticket's page with
its status/priority/assignee form, and creating a ticket. Customers see only their own tickets —
`desk.helpdesk.tickets` decides that, the page only shows what it is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from desk.core import inputs
from desk.core.errors import TooLarge, ValidationProblem
from desk.core.models import Priority, Role, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, filters, tickets
from desk.work import opening
from desk.work.conversation import IncomingFile
from ui import sla_words, task_lists
from ui.reminders_box import reminders_context
from ui.render import fragment_or_page, is_htmx, render
from ui.route import UiRoute, redirect
from ui.thread_view import chosen_files, fields_context, session_page
from ui.viewer import PageViewer, Viewer, page_viewer
from web.auth import RuntimeDep
from web.errors import too_many_file_parts

router = APIRouter(route_class=UiRoute)
PAGE = 25
FILTER_KEYS = ("status", "priority", "assignment", "assignee_id", "q", "sla")
# The SLA filter's choices (staff): value, words.
SLA_CHOICES = (("", "Any"), ("BREACHED", "Breached"), ("DUE_SOON", "Due soon"),
               ("RUNNING", "Running"))  # fmt: skip


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
        # "due in / breached": worked out now, never cached (ui/sla_words.py)
        "sla": sla_words.cells(page.items, rt.clock(), staff=v.is_staff),
        "sla_choices": SLA_CHOICES,
    }
    if not is_htmx(request):
        context["listing"] = await task_lists.task_list(
            rt, v.user_id, team_id, limit=task_lists.PANEL_SIZE
        )
    return fragment_or_page(request, "tickets.html", context, "ticket_list")


@router.get("/tickets/new")
async def new_ticket(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    v.require_team()
    context = {"v": v, "values": {}, "priorities": list(Priority)}
    return render(request, "ticket_new.html", context | _limits(rt))


def _limits(rt: Runtime) -> dict[str, Any]:
    return {"max_files": rt.settings.message_max_files}


@router.post("/tickets")
async def create_ticket(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    """A new ticket; its opening message may carry files (a screenshot), all in one step."""
    team_id = v.require_team()
    try:
        form = await request.form(max_files=rt.settings.message_max_files * 2 + 2, max_fields=50)
    except HTTPException as exc:
        # As a reply's (ui/thread_routes.py): past the parser's file cap is the message's 413.
        if not too_many_file_parts(exc):
            raise
        return _new_refused(request, rt, v, {}, attachments.too_many(rt.settings.message_max_files))
    try:
        values = {k: _field(form, k) for k in ("title", "body", "priority")}
        files = [IncomingFile(u.filename or "file", u) for u in chosen_files(form)]
        try:
            opened = await opening.open_ticket(
                rt, v.user_id, team_id, values["title"], values["body"],
                values["priority"] or "NORMAL", files,
            )  # fmt: skip
        except (ValidationProblem, TooLarge) as problem:
            return _new_refused(request, rt, v, values, problem)
    finally:
        await form.close()
    return redirect(request, f"/tickets/{opened.ticket.id}")


def _new_refused(
    request: Request, rt: Runtime, v: Viewer, values: dict[str, str], problem: Any
) -> Response:
    context = {"v": v, "values": values, "problem": problem, "priorities": list(Priority)}
    context |= _limits(rt)
    block = "ticket_form" if is_htmx(request) else None
    status = problem.http_status
    return render(request, "ticket_new.html", context, block=block, status=status)


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


async def _ticket_context(rt: Runtime, v: Viewer, ticket_id: int) -> dict[str, Any]:
    """Details and (staff) the reminder box: the blocks the ticket's own forms re-render."""
    context = await fields_context(rt, v, await tickets.get_ticket(rt, v.user_id, ticket_id))
    if context["is_staff"]:
        context |= await reminders_context(rt, v, context["ticket"])
    return context


@router.get("/tickets/{ticket_id}")
async def ticket_page(request: Request, ticket_id: int, rt: RuntimeDep) -> Response:
    if is_htmx(request):
        fragments = {"reminders": "reminders", "ticket-fields": "fields"}
        block = fragments.get(request.headers.get("hx-target", ""), "fields")
        v = await page_viewer(request, rt)
        return render(request, "ticket.html", await _ticket_context(rt, v, ticket_id), block=block)
    # The thread opens on its newest messages (docs/architecture.md, "Conversation"), read
    # with the session in one statement: no PageViewer dependency, which would read it first.
    return render(request, "ticket.html", await session_page(rt, request, ticket_id))


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
