"""Tickets over REST: one ticket, and a team's tickets filtered as the list and exports filter
them (desk/helpdesk/filters.py), newest first, a page at a time.

The rules are desk.helpdesk.tickets', as for GraphQL and the pages: a ticket or team you may not
see answers 404 exactly like a missing one; a customer sees their own tickets only. The SLA
fields (`sla_due_at`, `sla_breached_at`, `sla_state`, read at the request's clock:
desk/helpdesk/sla_state.py) are staff's and admins': null for a customer, whose `sla` filter
is refused (422 naming `sla`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.openapi import ERRORS, PLAIN_TEXT
from api.rest import PREFIX, PriorityName, StatusName, caller_of
from desk.core.models import Ticket
from desk.helpdesk import tickets
from desk.helpdesk.filters import MAX_Q, parse_filter
from desk.helpdesk.sla_state import state_of
from desk.people import access
from desk.reads import lookups
from web.auth import RuntimeDep

router = APIRouter(prefix=PREFIX, tags=["tickets"])

SlaStateName = Literal["NONE", "RUNNING", "DUE_SOON", "BREACHED"]
SlaFilterName = Literal["BREACHED", "DUE_SOON", "RUNNING"]


class TicketOut(BaseModel):
    ticket_id: int
    team_id: int
    title: str
    status: StatusName
    priority: PriorityName
    creator_id: int
    assignee_id: int | None
    message_count: int = Field(description="Public messages, the opening one included")
    first_response_at: datetime | None
    created_at: datetime
    updated_at: datetime
    sla_due_at: datetime | None = Field(
        description="The soonest running SLA target's due instant (staff; null for customers)"
    )
    sla_breached_at: datetime | None = Field(
        description="When it first missed an SLA target, kept (staff; null for customers)"
    )
    sla_state: SlaStateName | None = Field(
        description="NONE, RUNNING, DUE_SOON (due within the hour) or BREACHED, now "
        "(staff; null for customers)"
    )


class TicketPageOut(BaseModel):
    items: list[TicketOut] = Field(description="Newest first")
    next_cursor: str | None = Field(description="Pass as `after` for the next page")


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def ticket_json(t: Ticket, *, staff: bool, now: datetime) -> dict[str, Any]:
    """A ticket its reader may see; the SLA fields only for the team's staff and admins."""
    sla = state_of(t.sla_due_at, t.sla_breached_at, now).value if staff else None
    return {
        "ticket_id": t.id,
        "team_id": t.team_id,
        "title": t.title,
        "status": t.status,
        "priority": t.priority,
        "creator_id": t.creator_id,
        "assignee_id": t.assignee_id,
        "message_count": t.message_count,
        "first_response_at": _iso(t.first_response_at),
        "created_at": t.created_at.isoformat(),
        "updated_at": t.updated_at.isoformat(),
        "sla_due_at": _iso(t.sla_due_at) if staff else None,
        "sla_breached_at": _iso(t.sla_breached_at) if staff else None,
        "sla_state": sla,
    }


@router.get("/tickets/{ticket_id}", response_model=TicketOut, responses=ERRORS.read)
async def get_ticket(ticket_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """One ticket; 404 when it is missing or not yours to see, alike."""
    caller = await caller_of(rt, request, write=False)
    wanted = lookups.require_id(ticket_id, "Ticket")
    async with rt.engine.connect() as conn:
        ticket, member = await tickets.visible_ticket(conn, caller.user_id, wanted)
    return JSONResponse(ticket_json(ticket, staff=member.is_staff, now=rt.clock()))


@router.get("/tickets", response_model=TicketPageOut, responses=ERRORS.read)
async def list_tickets(
    request: Request,
    rt: RuntimeDep,
    team_id: Annotated[str, Query(description="the team's id")],
    status: Annotated[list[StatusName] | None, Query()] = None,
    priority: Annotated[list[PriorityName] | None, Query()] = None,
    assignment: Annotated[
        Literal["anyone", "me", "unassigned"] | None,
        Query(description="anyone (the default), me or unassigned; see assignee_id"),
    ] = None,
    assignee_id: Annotated[
        int | None,
        Query(ge=1, le=lookups.MAX_ID, description="assigned to this member (over assignment)"),
    ] = None,
    q: Annotated[
        str | None,
        Query(max_length=MAX_Q, pattern=PLAIN_TEXT, description="the title or a message contains"),
    ] = None,
    sla: Annotated[
        SlaFilterName | None, Query(description="tickets whose sla_state is this (staff)")
    ] = None,
    first: Annotated[int, Query(ge=1, le=tickets.MAX_PAGE)] = 50,
    after: Annotated[str | None, Query(max_length=200, description="next_cursor")] = None,
) -> JSONResponse:
    """A team's tickets you may see (customers: their own), newest first. 404 for a team you
    are not in, as for a missing one."""
    caller = await caller_of(rt, request, write=False)
    team = lookups.require_id(team_id, "Team")
    raw: dict[str, Any] = {"status": status, "priority": priority, "q": q, "sla": sla}
    if assignee_id is not None:
        raw |= {"assignment": "user", "assignee_id": assignee_id}
    elif assignment:
        raw["assignment"] = assignment
    f = parse_filter({k: v for k, v in raw.items() if v is not None})
    page = await tickets.list_tickets(
        rt, caller.user_id, team, f, first=first, after=after, count=False
    )
    async with rt.engine.connect() as conn:
        member = await access.membership(conn, caller.user_id, team)
    staff = member is not None and member.is_staff
    now = rt.clock()
    items = [ticket_json(t, staff=staff, now=now) for t in page.items]
    return JSONResponse({"items": items, "next_cursor": page.end_cursor if page.has_next else None})
