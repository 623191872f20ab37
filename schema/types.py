"""GraphQL object types shared across the schema: enums, people, teams, tickets, tasks, pages.

Objects are built from desk rows by `from_model`; related objects (a ticket's team, creator,
assignee and pending reminder, a team's members) come through the request's DataLoaders, so a
list costs one query per relation, not one per row.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Generic, TypeVar

import strawberry
from strawberry import ID, Private
from strawberry.scalars import JSON

from desk.core.models import BackgroundTask, Priority, Role, TaskKind, TaskStatus, TicketStatus
from desk.core.models import Ticket as TicketRow
from desk.helpdesk import tickets
from desk.ledger import rules as task_rules
from desk.reads import lookups
from desk.reads.tasks import TaskRow
from schema.context import ctx_of

if TYPE_CHECKING:  # the thread's types build on these: one layer, named lazily (schema.thread)
    from schema.thread import TicketHistoryConnection, TicketMessageConnection

T = TypeVar("T")

strawberry.enum(Role, description="A member's role in a team.")
strawberry.enum(TicketStatus)
strawberry.enum(Priority)
strawberry.enum(TaskKind)
strawberry.enum(TaskStatus, description="The ledger state; see `Task.statusLabel` for people.")


@strawberry.type
class User:
    id: ID
    display_name: str

    @classmethod
    def from_model(cls, u: lookups.UserName) -> User:
        return cls(id=ID(str(u.id)), display_name=u.display_name)


@strawberry.type
class TeamMember:
    user: User
    role: Role


@strawberry.type
class Team:
    id: ID
    name: str
    my_role: Role = strawberry.field(description="The caller's role in this team.")

    @classmethod
    def from_view(cls, t: lookups.TeamView) -> Team:
        return cls(id=ID(str(t.id)), name=t.name, my_role=t.role)

    @strawberry.field(
        description="The team's members for assignee pickers (a customer sees the staff and themselves)."
    )
    async def members(self, info: strawberry.Info) -> list[TeamMember]:
        rows = await ctx_of(info).loaders.members.load(int(self.id))
        return [
            TeamMember(user=User(id=ID(str(uid)), display_name=name), role=Role(role))
            for uid, name, _email, role in rows
        ]


@strawberry.type
class Membership:
    team: Team
    role: Role


@strawberry.type
class Me:
    id: ID
    email: str
    display_name: str
    memberships: list[Membership]


async def _user(info: strawberry.Info, user_id: int | None) -> User | None:
    if user_id is None:
        return None
    found = await ctx_of(info).loaders.users.load(user_id)
    return User.from_model(found) if found else None


@strawberry.type
class Ticket:
    id: ID
    title: str
    body: str
    status: TicketStatus
    priority: Priority
    created_at: datetime
    updated_at: datetime
    team_id: Private[int]
    creator_id: Private[int]
    assignee_id: Private[int | None]

    @classmethod
    def from_model(cls, t: TicketRow) -> Ticket:
        return cls(
            id=ID(str(t.id)),
            title=t.title,
            body=t.body,
            status=TicketStatus(t.status),
            priority=Priority(t.priority),
            created_at=t.created_at,
            updated_at=t.updated_at,
            team_id=t.team_id,
            creator_id=t.creator_id,
            assignee_id=t.assignee_id,
        )

    @strawberry.field
    async def team(self, info: strawberry.Info) -> Team | None:
        view = await ctx_of(info).loaders.teams.load(self.team_id)
        return Team.from_view(view) if view else None

    @strawberry.field
    async def creator(self, info: strawberry.Info) -> User | None:
        return await _user(info, self.creator_id)

    @strawberry.field
    async def assignee(self, info: strawberry.Info) -> User | None:
        return await _user(info, self.assignee_id)

    @strawberry.field(description="The active reminder (staff and admins; null for customers).")
    async def pending_reminder(self, info: strawberry.Info) -> Task | None:
        ctx = ctx_of(info)
        row = await ctx.loaders.reminders.load(int(self.id))
        return Task.from_model(row, ctx.now(), ctx.user_id) if row else None

    @strawberry.field(
        description="The conversation in thread order, the opening message first: `first` "
        "messages after `after`, or — with `last` — the last ones before `before` (a thread "
        "view opens with `last`). Internal notes only for staff and admins. 1 to 200."
    )
    async def messages(
        self,
        info: strawberry.Info,
        first: int = 50,
        after: str | None = None,
        last: int | None = None,
        before: str | None = None,
    ) -> Annotated["TicketMessageConnection", strawberry.lazy("schema.thread")]:  # noqa: UP037
        from schema import thread

        return await thread.messages_of(info, int(self.id), first, after, last, before)

    @strawberry.field(
        description="Every change of status, priority, assignee and title, oldest first "
        "(`first` 1 to 200 after `after`)."
    )
    async def history(
        self, info: strawberry.Info, first: int = 50, after: str | None = None
    ) -> Annotated["TicketHistoryConnection", strawberry.lazy("schema.thread")]:  # noqa: UP037
        from schema import thread

        return await thread.history_of(info, int(self.id), first, after)


@strawberry.type(description="One unit of background work, as recorded in the ledger.")
class Task:
    id: ID
    kind: TaskKind
    status: TaskStatus
    status_label: str = strawberry.field(
        description="Queued, Scheduled, Running, Worker lost (running, but its worker stopped "
        "answering: it resumes when a worker is back), Cancelling, Retrying, Completed, Skipped, "
        "Failed, Cancelled or Expired."
    )
    progress: float = strawberry.field(description="0 to 1.")
    progress_message: str
    attempts: int
    max_attempts: int
    last_error: str | None = strawberry.field(
        description="Why the last attempt failed, in English (a stable sentence)."
    )
    last_error_key: str | None = strawberry.field(
        description="`lastError` as a stable key (e.g. export.too_many_rows) for translating it, "
        "when it has one; its figures are in `lastErrorParams`."
    )
    last_error_params: dict[str, Any] = strawberry.field(graphql_type=JSON)
    note: str
    run_at: datetime
    dispatched_at: datetime | None = strawberry.field(
        description="When the task was last handed to the queue; null until it is (or while "
        "it waits to be sent again): a paused lane, its team's long cap, a send handed back."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result_summary: str | None = strawberry.field(
        description="What the task did or why it was skipped, in English (a stable sentence)."
    )
    result_summary_key: str | None = strawberry.field(
        description="`resultSummary` as a stable key (e.g. export.done) for translating it; "
        "its figures are in `resultSummaryParams`."
    )
    result_summary_params: dict[str, Any] = strawberry.field(graphql_type=JSON)
    expires_at: datetime | None
    download_url: str | None = strawberry.field(
        description="The CSV of a completed export, for its owner only, until `expiresAt`."
    )
    can_cancel: bool
    can_retry: bool
    team_id: Private[int]
    owner_id: Private[int]
    ticket_id: Private[int | None]

    @classmethod
    def from_model(cls, t: BackgroundTask | TaskRow, now: datetime, viewer_id: int) -> Task:
        """`t` must be a task `viewer_id` may see (desk returned it to them)."""
        return cls(
            id=ID(str(t.id)),
            kind=t.kind,  # type: ignore[arg-type]  # the enum serialises its str value
            status=t.status,  # type: ignore[arg-type]
            status_label=task_rules.status_label(t, now),
            progress=t.progress,
            progress_message=t.progress_message,
            attempts=t.attempts,
            max_attempts=t.max_attempts,
            last_error=t.last_error,
            last_error_key=t.error_key,
            last_error_params=t.error_params or {},
            note=t.note,
            run_at=t.run_at,
            dispatched_at=t.dispatched_at,
            created_at=t.created_at,
            started_at=t.started_at,
            finished_at=t.finished_at,
            result_summary=t.result_summary,
            result_summary_key=t.summary_key,
            result_summary_params=t.summary_params or {},
            expires_at=t.expires_at,
            download_url=(
                f"/tasks/{t.id}/download"
                if task_rules.export_downloadable(t, viewer_id, now)
                else None
            ),
            can_cancel=task_rules.can_cancel(t),
            can_retry=task_rules.can_retry(t),
            team_id=t.team_id,
            owner_id=t.owner_id,
            ticket_id=t.ticket_id,
        )

    @strawberry.field(description="The reminder's ticket (null for exports).")
    async def ticket(self, info: strawberry.Info) -> Ticket | None:
        if self.ticket_id is None:
            return None
        row = await ctx_of(info).loaders.tickets.load(self.ticket_id)
        return Ticket.from_model(row) if row else None

    @strawberry.field(description="Who started it.")
    async def owner(self, info: strawberry.Info) -> User | None:
        found = await ctx_of(info).loaders.users.load(self.owner_id)
        return User.from_model(found) if found else None

    @strawberry.field
    async def team(self, info: strawberry.Info) -> Team | None:
        view = await ctx_of(info).loaders.teams.load(self.team_id)
        return Team.from_view(view) if view else None


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class Edge(Generic[T]):
    cursor: str
    node: T


@strawberry.type
class TicketConnection:
    edges: list[Edge[Ticket]]
    page_info: PageInfo
    total_count: int = strawberry.field(
        description=f"How many tickets match, counted up to {tickets.COUNT_CAP:,}: above that "
        f"it is {tickets.COUNT_CAP:,} and `totalCountIsExact` is false (show it as "
        f'"{tickets.COUNT_CAP:,}+"). Counted only when asked for.'
    )
    total_count_is_exact: bool = strawberry.field(
        description="False when more tickets match than `totalCount` says (it hit the cap)."
    )

    @strawberry.field
    def nodes(self) -> list[Ticket]:
        return [e.node for e in self.edges]

    @classmethod
    def from_page(cls, page: tickets.TicketPage) -> TicketConnection:
        edges = [
            Edge(cursor=tickets.encode_cursor(t.created_at, t.id or 0), node=Ticket.from_model(t))
            for t in page.items
        ]
        return cls(
            edges=edges,
            page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor),
            # Not counted means not selected, so this 0 is never shown to anybody.
            total_count=page.total or 0,
            total_count_is_exact=page.total_exact,
        )

    @classmethod
    def empty(cls) -> TicketConnection:
        return cls(
            edges=[],
            page_info=PageInfo(has_next_page=False, end_cursor=None),
            total_count=0,
            total_count_is_exact=True,
        )
