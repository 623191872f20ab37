"""Who am I, my teams, and the system's health."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry import ID

from desk.console import health
from desk.core.errors import Unauthenticated
from desk.people import users
from desk.reads import lookups
from schema.basics import Me, Membership, Team
from schema.context import ctx_of
from schema.errors import fail
from web.operator_access import ops_allowed

DETAIL = " Operators only (as /health's detail); null for anyone else."


@strawberry.type(
    description="Green means recent activity, not that a given CSV is right. `ok` is for "
    "everyone; the rest is the operators' detail, as /health shows it (OPS_TOKEN, "
    "OPS_ALLOWED_ADDRESSES), null for anyone else."
)
class Health:
    ok: bool
    redis_ok: bool | None = strawberry.field(default=None, description="Redis answers." + DETAIL)
    workers: int | None = strawberry.field(
        default=None, description="Live worker processes." + DETAIL
    )
    last_sweep: datetime | None = strawberry.field(
        default=None, description="The dispatcher's last pass." + DETAIL
    )
    queue_depth: int | None = strawberry.field(
        default=None, description="Messages in the queue." + DETAIL
    )
    oldest_overdue_seconds: float | None = strawberry.field(
        default=None, description="Age of the oldest WAITING task that is past due." + DETAIL
    )


@strawberry.type
class ViewerQuery:
    @strawberry.field(description="You: your account and the teams you belong to, with roles.")
    async def me(self, info: strawberry.Info) -> Me:
        ctx = ctx_of(info)
        async with ctx.slot():
            user = await users.get_user(ctx.rt, ctx.user_id)
            if user is None:  # the account was deleted while its session or token lived on
                fail(Unauthenticated())
            teams = await users.teams_of(ctx.rt, ctx.user_id)
        return Me(
            id=ID(str(user.id)),
            email=user.email,
            display_name=user.display_name,
            memberships=[
                Membership(
                    team=Team.from_view(lookups.TeamView(t.team_id, t.team_name, t.role)),
                    role=t.role,
                )
                for t in teams
            ],
        )

    @strawberry.field(description="A team you belong to; null otherwise.")
    async def team(self, info: strawberry.Info, id: ID) -> Team | None:
        ctx = ctx_of(info)
        team_id = lookups.parse_id(id)
        if team_id is None:
            _ = ctx.user_id  # anonymous callers still get UNAUTHENTICATED
            return None
        view = await ctx.loaders.teams.load(team_id)
        return Team.from_view(view) if view else None

    @strawberry.field(description="Redis, workers, the dispatcher and the queue.")
    async def health(self, info: strawberry.Info) -> Health:
        ctx = ctx_of(info)
        _ = ctx.user_id  # signed-in callers only; /health is the public probe
        async with ctx.slot():
            report = await health.check(ctx.rt)
        # The rule of /health (web/operator_access.py), whatever the caller's roles in teams.
        if ctx.request is None or not ops_allowed(ctx.rt.settings, ctx.request):
            return Health(ok=report.ok)
        return Health(
            ok=report.ok,
            redis_ok=report.redis_ok,
            workers=len(report.workers),
            last_sweep=report.last_sweep,
            queue_depth=report.queue_depth,
            oldest_overdue_seconds=report.oldest_overdue_seconds,
        )
