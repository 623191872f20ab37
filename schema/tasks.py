"""Tasks over GraphQL: `task(id)` (the hot status read), `tasks`, and the mutations that start,
cancel and retry tasks (exports, reminders). The `Task` type is in `schema.types`, beside the
types it links to; every rule lives in desk."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.clock import arrived_at
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import TaskKind, TaskStatus
from desk.reads import lookups
from desk.reads import tasks as reads
from desk.work import reminders, tasks
from schema import problems as e
from schema.basics import Edge, PageInfo
from schema.context import Context, ctx_of
from schema.errors import fail
from schema.problems import attempt
from schema.tickets import TicketFilterInput
from schema.types import Task


@strawberry.type
class TaskConnection:
    edges: list[Edge[Task]]
    page_info: PageInfo

    @strawberry.field
    def nodes(self) -> list[Task]:
        return [edge.node for edge in self.edges]


def _empty() -> TaskConnection:
    return TaskConnection(edges=[], page_info=PageInfo(has_next_page=False, end_cursor=None))


@strawberry.type
class ReminderCancelled:
    task: Task | None = strawberry.field(description="The reminder that was pending, if any.")


CreateExportResult = Annotated[
    Task | e.TaskConflict | e.QuotaExceeded | e.ValidationProblem | e.NotFound,
    strawberry.union("CreateExportResult"),
]
ScheduleReminderResult = Annotated[
    Task | e.TaskConflict | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("ScheduleReminderResult"),
]
CancelReminderResult = Annotated[
    ReminderCancelled | e.NotFound | e.NotAllowed, strawberry.union("CancelReminderResult")
]
CancelTaskResult = Annotated[Task | e.NotFound, strawberry.union("CancelTaskResult")]
RetryTaskResult = Annotated[
    Task | e.TaskConflict | e.ValidationProblem | e.NotFound, strawberry.union("RetryTaskResult")
]


KeyArgument = Annotated[
    str | None,
    strawberry.argument(
        description="Makes retries safe: the same key (8 to 100 of A-Z a-z 0-9 _ . : -) within "
        "a few minutes returns the task it first made, even a finished one; with a different "
        "request it is a ValidationProblem. The `Idempotency-Key` header works as well."
    ),
]


def _idempotency_key(ctx: Context, argument: str | None) -> str | None:
    """The argument or the `Idempotency-Key` header (Stripe's name); both must agree."""
    header = ctx.request.headers.get("idempotency-key") if ctx.request is not None else None
    if header and argument and header != argument:
        raise ValidationProblem(
            "idempotency_key", "the Idempotency-Key header and the idempotencyKey argument differ"
        )
    return argument or header or None


@strawberry.type
class TaskQuery:
    @strawberry.field(description="One task by id; null when missing or not yours to see.")
    async def task(self, info: strawberry.Info, id: ID) -> Task | None:
        ctx = ctx_of(info)
        user_id = ctx.user_id
        task_id = lookups.parse_id(id)
        if task_id is None:
            return None
        hit = ctx.tasks_read.get(task_id)  # read with the caller's session (a status read)
        if hit is None:
            async with ctx.slot():
                hit = await reads.task(ctx.rt.pg, user_id, task_id)
        return Task.from_model(hit.task, ctx.now(), user_id) if hit.task else None

    @strawberry.field(description="A team's tasks you may see, newest first.")
    async def tasks(
        self,
        info: strawberry.Info,
        team_id: ID,
        kind: TaskKind | None = None,
        status: TaskStatus | None = None,
        first: int = 20,
        after: str | None = None,
        newer_than: Annotated[
            ID | None,
            strawberry.argument(description="Only tasks newer than this id ('anything new?')."),
        ] = None,
    ) -> TaskConnection:
        ctx = ctx_of(info)
        user_id = ctx.user_id
        team = lookups.parse_id(team_id)
        newer = lookups.parse_id(newer_than) if newer_than is not None else None
        if newer_than is not None and newer is None:
            fail(ValidationProblem("newer_than", "not a task id"))
        if team is None:
            return _empty()
        try:
            async with ctx.slot():
                page = await reads.list_tasks(
                    ctx.rt.pg,
                    user_id,
                    team,
                    kind=kind.value if kind else None,
                    status=status.value if status else None,
                    first=first,
                    after=after,
                    newer_than=newer,
                )
        except NotFound:
            return _empty()
        except ValidationProblem as exc:
            fail(exc)
        now = ctx.now()
        edges = [Edge(cursor=str(t.id), node=Task.from_model(t, now, user_id)) for t in page.items]
        return TaskConnection(
            edges=edges, page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor)
        )


@strawberry.type
class TaskMutation:
    @strawberry.mutation(description="Queue an export of the team's tickets matching `filter`.")
    async def create_export(
        self,
        info: strawberry.Info,
        team_id: ID,
        filter: TicketFilterInput | None = None,
        idempotency_key: KeyArgument = None,
    ) -> CreateExportResult | None:
        async def run(ctx: Context, user_id: int) -> Task:
            key = _idempotency_key(ctx, idempotency_key)
            team = lookups.parse_id(team_id)
            if team is None:
                raise NotFound("Team not found.")
            raw = filter.raw() if filter else None
            row = await tasks.create_export(
                ctx.rt, user_id, team, raw, idempotency_key=key, session=ctx.session
            )
            return Task.from_model(row, ctx.now(), user_id)

        allowed = (e.TaskConflict, e.QuotaExceeded, e.ValidationProblem, e.NotFound)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(
        description="Remind the ticket's assignee at `at` or in `inMinutes` minutes if it is "
        "still unresolved (staff and admins). Another time reschedules."
    )
    async def schedule_reminder(
        self,
        info: strawberry.Info,
        ticket_id: ID,
        at: datetime | None = None,
        in_minutes: int | None = None,
        note: str = "",
        idempotency_key: KeyArgument = None,
    ) -> ScheduleReminderResult | None:
        async def run(ctx: Context, user_id: int) -> Task:
            row = await reminders.schedule_reminder(
                ctx.rt,
                user_id,
                lookups.require_id(ticket_id, "Ticket"),
                at=at,
                in_minutes=in_minutes,
                note=note,
                idempotency_key=_idempotency_key(ctx, idempotency_key),
                arrived_at=arrived_at(ctx.request, ctx.rt.clock),
            )
            return Task.from_model(row, ctx.now(), user_id)

        allowed = (e.TaskConflict, e.ValidationProblem, e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(description="Cancel the ticket's pending reminder, if any.")
    async def cancel_reminder(
        self, info: strawberry.Info, ticket_id: ID
    ) -> CancelReminderResult | None:
        async def run(ctx: Context, user_id: int) -> ReminderCancelled:
            row = await reminders.cancel_reminder(
                ctx.rt, user_id, lookups.require_id(ticket_id, "Ticket")
            )
            return ReminderCancelled(task=Task.from_model(row, ctx.now(), user_id) if row else None)

        return await attempt(info, run, (e.NotFound, e.NotAllowed))  # type: ignore[return-value]

    @strawberry.mutation(
        description="A waiting task is cancelled at once; a running one stops at its next step."
    )
    async def cancel_task(self, info: strawberry.Info, id: ID) -> CancelTaskResult | None:
        async def run(ctx: Context, user_id: int) -> Task:
            row = await tasks.cancel_task(ctx.rt, user_id, lookups.require_id(id, "Task"))
            return Task.from_model(row, ctx.now(), user_id)

        return await attempt(info, run, (e.NotFound,))  # type: ignore[return-value]

    @strawberry.mutation(description="Run a failed task again, with its full attempts.")
    async def retry_task(self, info: strawberry.Info, id: ID) -> RetryTaskResult | None:
        async def run(ctx: Context, user_id: int) -> Task:
            row = await tasks.retry_task(ctx.rt, user_id, lookups.require_id(id, "Task"))
            return Task.from_model(row, ctx.now(), user_id)

        allowed = (e.TaskConflict, e.ValidationProblem, e.NotFound)
        return await attempt(info, run, allowed)  # type: ignore[return-value]
