"""Tickets over GraphQL: `ticket`, `tickets` (a Relay-style connection), `createTicket`,
`updateTicket`, and the filter input that exports share. Rules live in desk.helpdesk.tickets."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import strawberry
from strawberry import ID
from strawberry.types.nodes import SelectedField, Selection

from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import Priority, TicketStatus
from desk.helpdesk import tickets
from desk.helpdesk.filters import parse_filter
from desk.reads import lookups
from schema import problems as e
from schema.context import Context, ctx_of
from schema.errors import fail
from schema.problems import attempt
from schema.ticket_sla import SlaFilter
from schema.types import Ticket, TicketConnection


@strawberry.enum(description="Whose tickets: anybody's, mine, nobody's, or one member's.")
class Assignment(Enum):
    ANYONE = "anyone"
    ME = "me"
    UNASSIGNED = "unassigned"
    USER = "user"


@strawberry.input(description="Ticket filters, shared by the ticket list and exports.")
class TicketFilterInput:
    status: list[TicketStatus] | None = None
    priority: list[Priority] | None = None
    assignment: Assignment = Assignment.ANYONE
    assignee_id: ID | None = strawberry.field(default=None, description="With assignment USER.")
    q: str | None = strawberry.field(default=None, description="Title contains (any case).")
    sla: SlaFilter | None = strawberry.field(
        default=None,
        description="Tickets whose `slaState` is this, at the request's time (an export: at "
        "its asking). Staff and admins only.",
    )

    def raw(self) -> dict[str, Any]:
        """The plain form desk.helpdesk.filters.parse_filter validates and normalises."""
        out: dict[str, Any] = {"assignment": self.assignment.value}
        if self.status:
            out["status"] = [s.value for s in self.status]
        if self.priority:
            out["priority"] = [p.value for p in self.priority]
        if self.assignee_id is not None:
            out["assignee_id"] = lookups.parse_id(self.assignee_id) or str(self.assignee_id)
        if self.q:
            out["q"] = self.q
        if self.sla:
            out["sla"] = self.sla.value
        return out


CreateTicketResult = Annotated[
    Ticket | e.ValidationProblem | e.NotFound, strawberry.union("CreateTicketResult")
]
UpdateTicketResult = Annotated[
    Ticket | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("UpdateTicketResult"),
]


@strawberry.type
class TicketQuery:
    @strawberry.field(description="One ticket; null when missing or not yours to see.")
    async def ticket(self, info: strawberry.Info, id: ID) -> Ticket | None:
        ctx = ctx_of(info)
        user_id = ctx.user_id
        ticket_id = lookups.parse_id(id)
        if ticket_id is None:
            return None
        try:
            async with ctx.slot():
                row = await tickets.get_ticket(ctx.rt, user_id, ticket_id)
        except NotFound:
            return None
        ctx.spend(len(row.title) + len(row.body))
        return Ticket.from_model(row)

    @strawberry.field(
        description="A team's tickets you may see (customers: their own), newest first; "
        "empty for a team you are not in."
    )
    async def tickets(
        self,
        info: strawberry.Info,
        team_id: ID,
        filter: TicketFilterInput | None = None,
        first: int = 50,
        after: str | None = None,
    ) -> TicketConnection:
        ctx = ctx_of(info)
        user_id = ctx.user_id
        try:
            f = parse_filter(filter.raw() if filter else None)
            team = lookups.parse_id(team_id)
            if team is None:
                return TicketConnection.empty()
            async with ctx.slot():
                page = await tickets.list_tickets(
                    ctx.rt, user_id, team, f, first=first, after=after, count=_asks_count(info)
                )
        except NotFound:
            return TicketConnection.empty()
        except ValidationProblem as exc:
            fail(exc)
        ctx.spend(sum(len(t.title) + len(t.body) for t in page.items))
        return TicketConnection.from_page(page)


@strawberry.type
class TicketMutation:
    @strawberry.mutation(description="Open a ticket in a team you belong to.")
    async def create_ticket(
        self,
        info: strawberry.Info,
        team_id: ID,
        title: str,
        body: str = "",
        priority: Priority = Priority.NORMAL,
    ) -> CreateTicketResult | None:
        async def run(ctx: Context, user_id: int) -> Ticket:
            team = lookups.parse_id(team_id)
            if team is None:
                raise NotFound("Team not found.")
            row = await tickets.create_ticket(ctx.rt, user_id, team, title, body, priority.value)
            return Ticket.from_model(row)

        allowed = (e.ValidationProblem, e.NotFound)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Change status, priority, title or assignee (staff and admins). "
        "`assigneeId: null` unassigns; leaving it out keeps the assignee. Resolving or closing "
        "makes a pending reminder skip."
    )
    async def update_ticket(
        self,
        info: strawberry.Info,
        id: ID,
        status: TicketStatus | None = None,
        priority: Priority | None = None,
        title: str | None = None,
        assignee_id: ID | None = strawberry.UNSET,
    ) -> UpdateTicketResult | None:
        changes: dict[str, Any] = {
            "status": status.value if status else None,
            "priority": priority.value if priority else None,
            "title": title,
        }

        async def run(ctx: Context, user_id: int) -> Ticket:
            ticket_id = lookups.parse_id(id)
            if ticket_id is None:
                raise NotFound("Ticket not found.")
            if assignee_id is not strawberry.UNSET:
                changes["assignee_id"] = _assignee(assignee_id)
            return Ticket.from_model(
                await tickets.update_ticket(ctx.rt, user_id, ticket_id, **changes)
            )

        allowed = (e.ValidationProblem, e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]


COUNT_FIELDS = frozenset({"totalCount", "totalCountIsExact"})


def _asks_count(info: strawberry.Info) -> bool:
    """Whether this `tickets` field selects a count, directly or through fragments: counting
    reads every match (up to the cap), so a page that shows no number does not pay for one."""
    return any(_selects(field.selections, COUNT_FIELDS) for field in info.selected_fields)


def _selects(selections: list[Selection], names: frozenset[str]) -> bool:
    for s in selections:
        if isinstance(s, SelectedField):
            if s.name in names:
                return True
        elif _selects(s.selections, names):  # a fragment spread or an inline fragment
            return True
    return False


def _assignee(value: ID | None) -> int | None:
    if value is None:
        return None
    assignee = lookups.parse_id(value)
    if assignee is None:
        raise ValidationProblem("assignee_id", "must be a staff member or admin of this team")
    return assignee
