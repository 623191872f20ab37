"""A ticket's SLA on GraphQL: the `SlaState` enum and who reads it. `Ticket.slaDueAt`,
`slaBreachedAt` and `slaState` (schema/types.py) answer staff and admins of the ticket's team;
a customer gets null, as a helpdesk's end users see no SLA (docs/architecture.md, "Business
hours"). The state is read at the request's clock (desk/helpdesk/sla_state.py)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from desk.helpdesk.sla_state import SlaState, state_of
from schema.context import ctx_of

strawberry.enum(
    SlaState,
    description="Where a ticket's SLA stands: NONE (no clock runs), RUNNING, DUE_SOON (the "
    "soonest target falls due within the hour), BREACHED (a target was missed; kept).",
)


@strawberry.enum(description="The SLA filter: tickets whose `slaState` is this.")
class SlaFilter(Enum):
    BREACHED = "BREACHED"
    DUE_SOON = "DUE_SOON"
    RUNNING = "RUNNING"


async def staff_sees(info: strawberry.Info, team_id: int) -> bool:
    """Whether the caller is staff or admin of the team (the request's teams loader: one
    statement for a page of tickets)."""
    view = await ctx_of(info).loaders.teams.load(team_id)
    return view is not None and view.role.is_staff


async def state(
    info: strawberry.Info, team_id: int, due_at: datetime | None, breached_at: datetime | None
) -> SlaState | None:
    if not await staff_sees(info, team_id):
        return None
    return state_of(due_at, breached_at, ctx_of(info).now())
