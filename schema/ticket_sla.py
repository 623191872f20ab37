"""A ticket's SLA on GraphQL: the `SlaState` enum and who reads it. `Ticket.slaDueAt`,
`slaBreachedAt` and `slaState` (schema/types.py) answer staff and admins of the ticket's team;
a customer gets null, as a helpdesk's end users see no SLA (docs/architecture.md, "Business
hours"). The state is read at the request's clock (desk/helpdesk/sla_state.py); so are
`Ticket.slaClocks`, each target's clock worked out again from the ticket's facts and its team's
policy (desk/work/sla_timers.py `ticket_clocks`: one read per ticket asked)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from desk.helpdesk.sla import Clock
from desk.helpdesk.sla_state import SlaState, state_of
from desk.work import sla_timers
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


@strawberry.enum(description="An SLA target: what a ticket's clock waits for.")
class SlaTarget(Enum):
    FIRST_RESPONSE = "first_response"
    NEXT_RESPONSE = "next_response"
    RESOLUTION = "resolution"


@strawberry.enum(description="Where one SLA target's clock stands.")
class SlaClockState(Enum):
    RUNNING = "running"
    PAUSED = "paused"  # the ticket waits on its customer (PENDING)
    MET = "met"
    BREACHED = "breached"


@strawberry.type(description="One SLA target of a ticket, at the request's time.")
class SlaClock:
    target: SlaTarget
    state: SlaClockState
    started_at: datetime
    due_at: datetime | None = strawberry.field(description="Null while paused.")
    warn_at: datetime | None = strawberry.field(description="When the warning is due.")
    remaining_seconds: float = strawberry.field(
        description="Business time left, in seconds (negative once breached)."
    )

    @classmethod
    def of(cls, c: Clock) -> SlaClock:
        return cls(
            target=SlaTarget(c.target), state=SlaClockState(c.state), started_at=c.started_at,
            due_at=c.due_at, warn_at=c.warn_at, remaining_seconds=c.left,
        )  # fmt: skip


async def clocks_of(info: strawberry.Info, ticket_id: int, team_id: int) -> list[SlaClock] | None:
    """The ticket's clocks (staff), empty when its team has no policy; None for customers."""
    if not await staff_sees(info, team_id):
        return None
    ctx = ctx_of(info)
    async with ctx.slot():
        row = await sla_timers.read(ctx.rt.pg, ticket_id)
    found = sla_timers.ticket_clocks(row, ctx.now()) if row is not None else None
    return [SlaClock.of(c) for c in found[0]] if found else []
