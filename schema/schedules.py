"""Scheduled exports over GraphQL: `schedules(teamId)`, `scheduleExport`, `pauseSchedule`,
`resumeSchedule`, `deleteSchedule`. Every rule lives in desk.work.schedules (who may schedule,
who sees a schedule: its owner and the team's admins; anyone else gets NotFound)."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated, Any

import strawberry
from strawberry import ID
from strawberry.scalars import JSON

from desk.core.errors import NotFound
from desk.reads import lookups
from desk.work import schedules
from desk.work.schedule_store import Schedule
from schema import problems as e
from schema.context import Context, ctx_of
from schema.problems import attempt
from schema.tickets import TicketFilterInput
from schema.types import Task


@strawberry.enum(description="ACTIVE runs; PAUSED waits for a person; STOPPED lost its owner.")
class ScheduleState(Enum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@strawberry.type(description="An export's saved filters, run on chosen weekdays at a local time.")
class ExportSchedule:
    id: ID
    team_id: ID
    owner_id: ID
    name: str
    filters: dict[str, Any] = strawberry.field(
        graphql_type=JSON, description="The saved filters, as createExport takes them."
    )
    days: list[int] = strawberry.field(description="ISO weekdays: 1 = Monday … 7 = Sunday.")
    time: str = strawberry.field(description="Local wall-clock time, HH:MM (24-hour).")
    timezone: str = strawberry.field(description="IANA time zone of `time`.")
    state: ScheduleState
    next_run_at: datetime = strawberry.field(description="The next occurrence (while ACTIVE).")
    last_run_at: datetime | None
    last_task_id: ID | None = strawberry.field(description="The export the last run made.")
    stopped_reason: str | None = strawberry.field(description="Why it STOPPED, in words.")
    stopped_reason_key: str | None = strawberry.field(description="`stoppedReason` as a key.")
    last_skip_reason: str | None = strawberry.field(
        description="Why the last occurrence made no export (e.g. the previous still running)."
    )
    created_at: datetime

    last_task: Task | None = strawberry.field(
        description="The last run's export, if you may see it (exports are their owner's)."
    )

    @classmethod
    def from_model(cls, s: Schedule, last_task: Task | None = None) -> ExportSchedule:
        return cls(
            id=ID(str(s.id)),
            team_id=ID(str(s.team_id)),
            owner_id=ID(str(s.owner_id)),
            name=s.name,
            filters=s.filters,
            days=list(s.days),
            time=s.local_time,
            timezone=s.timezone,
            state=ScheduleState(s.state),
            next_run_at=s.next_run_at,
            last_run_at=s.last_run_at,
            last_task_id=ID(str(s.last_task_id)) if s.last_task_id else None,
            stopped_reason=schedules.reason_text(s.stopped_reason),
            stopped_reason_key=s.stopped_reason,
            last_skip_reason=schedules.reason_text(s.last_skip_reason),
            created_at=s.created_at,
            last_task=last_task,
        )


@strawberry.type
class ScheduleDeleted:
    id: ID


ScheduleExportResult = Annotated[
    ExportSchedule | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("ScheduleExportResult"),
]
PauseScheduleResult = Annotated[
    ExportSchedule | e.NotFound, strawberry.union("PauseScheduleResult")
]
ResumeScheduleResult = Annotated[
    ExportSchedule | e.NotFound | e.NotAllowed, strawberry.union("ResumeScheduleResult")
]
DeleteScheduleResult = Annotated[
    ScheduleDeleted | e.NotFound, strawberry.union("DeleteScheduleResult")
]


async def _with_tasks(ctx: Context, found: list[Schedule]) -> list[ExportSchedule]:
    """The schedules as GraphQL shows them, their last exports read in one go."""
    user_id = ctx.user_id
    tasks = await schedules.last_tasks(ctx.rt, user_id, found)
    now = ctx.now()
    out = []
    for s in found:
        task = tasks.get(s.last_task_id or 0)
        shown = Task.from_model(task, now, user_id) if task is not None else None
        out.append(ExportSchedule.from_model(s, shown))
    return out


@strawberry.type
class ScheduleQuery:
    @strawberry.field(
        description="The team's export schedules you may see: an admin all of them, anyone "
        "else their own."
    )
    async def schedules(self, info: strawberry.Info, team_id: ID) -> list[ExportSchedule]:
        ctx = ctx_of(info)
        team = lookups.parse_id(team_id)
        if team is None:
            return []
        try:
            async with ctx.slot():
                found = await schedules.list_schedules(ctx.rt, ctx.user_id, team)
                return await _with_tasks(ctx, found)
        except NotFound:
            return []


@strawberry.type
class ScheduleMutation:
    @strawberry.mutation(
        description="Export the team's tickets matching `filter` on `days` (ISO weekdays) at "
        "`time` (HH:MM) in `timezone` (default: yours), across daylight-saving changes. Staff "
        "and admins."
    )
    async def schedule_export(
        self,
        info: strawberry.Info,
        team_id: ID,
        days: list[int],
        time: str,
        filter: TicketFilterInput | None = None,
        timezone: str | None = None,
        name: str | None = None,
    ) -> ScheduleExportResult | None:
        async def run(ctx: Context, user_id: int) -> ExportSchedule:
            team = lookups.parse_id(team_id)
            if team is None:
                raise NotFound("Team not found.")
            raw: dict[str, Any] | None = filter.raw() if filter else None
            row = await schedules.create_schedule(
                ctx.rt, user_id, team, raw, days=days, time=time, timezone=timezone, name=name
            )
            return ExportSchedule.from_model(row)

        allowed = (e.ValidationProblem, e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(description="No more runs until resumed.")
    async def pause_schedule(self, info: strawberry.Info, id: ID) -> PauseScheduleResult | None:
        async def run(ctx: Context, user_id: int) -> ExportSchedule:
            row = await schedules.pause_schedule(
                ctx.rt, user_id, lookups.require_id(id, "Schedule")
            )
            return (await _with_tasks(ctx, [row]))[0]

        return await attempt(info, run, (e.NotFound,))  # type: ignore[return-value]

    @strawberry.mutation(
        description="Runs again from its next occurrence (missed ones do not run). A STOPPED "
        "schedule resumes only once its owner may export the team's tickets again."
    )
    async def resume_schedule(self, info: strawberry.Info, id: ID) -> ResumeScheduleResult | None:
        async def run(ctx: Context, user_id: int) -> ExportSchedule:
            row = await schedules.resume_schedule(
                ctx.rt, user_id, lookups.require_id(id, "Schedule")
            )
            return (await _with_tasks(ctx, [row]))[0]

        return await attempt(info, run, (e.NotFound, e.NotAllowed))  # type: ignore[return-value]

    @strawberry.mutation(description="Delete the schedule; the exports it made stay.")
    async def delete_schedule(self, info: strawberry.Info, id: ID) -> DeleteScheduleResult | None:
        async def run(ctx: Context, user_id: int) -> ScheduleDeleted:
            row = await schedules.delete_schedule(
                ctx.rt, user_id, lookups.require_id(id, "Schedule")
            )
            return ScheduleDeleted(id=ID(str(row.id)))

        return await attempt(info, run, (e.NotFound,))  # type: ignore[return-value]
