"""GraphQL object types of tickets, tasks and a ticket's conversation, which refer to one another
(a ticket's reminder is a task, a task's ticket a ticket, a message's ticket a ticket): one
module, so no import circle; the people, teams and page pieces they build on are
`schema.basics`.

Objects are built from desk rows by `from_model`; related objects (a ticket's team, creator,
assignee and pending reminder, a team's members) come through the request's DataLoaders, so a
list costs one query per relation, not one per row.
"""

from __future__ import annotations

import base64
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

import strawberry
from strawberry import ID, Private
from strawberry.scalars import JSON

from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.core.models import BackgroundTask, Priority, TaskKind, TaskStatus, TicketStatus
from desk.core.models import Ticket as TicketRow
from desk.helpdesk import thread, tickets
from desk.helpdesk.attachments import Attachment as AttachmentRow
from desk.helpdesk.sla_state import SlaState
from desk.ledger import rules as task_rules
from desk.reads.conversation import Delivery
from desk.reads.tasks import TaskRow
from desk.reads.threads import MessageView
from schema import ticket_sla
from schema.basics import Edge, PageInfo, Team, User, _user
from schema.context import ctx_of
from schema.errors import fail


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
    due_at: Private[datetime | None] = None
    breached_at: Private[datetime | None] = None

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
            due_at=t.sla_due_at,
            breached_at=t.sla_breached_at,
        )

    @strawberry.field(
        description="The soonest running SLA target's due instant; null when no clock runs. "
        "Staff and admins; null for customers."
    )
    async def sla_due_at(self, info: strawberry.Info) -> datetime | None:
        return self.due_at if await ticket_sla.staff_sees(info, self.team_id) else None

    @strawberry.field(
        description="When the ticket first missed an SLA target (kept). Staff and admins; "
        "null for customers."
    )
    async def sla_breached_at(self, info: strawberry.Info) -> datetime | None:
        return self.breached_at if await ticket_sla.staff_sees(info, self.team_id) else None

    @strawberry.field(
        description="Where the SLA stands now (a due instant already past is BREACHED). "
        "Staff and admins; null for customers."
    )
    async def sla_state(self, info: strawberry.Info) -> SlaState | None:
        return await ticket_sla.state(info, self.team_id, self.due_at, self.breached_at)

    @strawberry.field(
        description="Each SLA target's clock now: target, state, due and warning instants, "
        "business time left. Empty when the team has no policy. Staff and admins; null for "
        "customers. One read per ticket: ask it of a ticket, not of a long list."
    )
    async def sla_clocks(self, info: strawberry.Info) -> list[ticket_sla.SlaClock] | None:
        return await ticket_sla.clocks_of(info, int(self.id), self.team_id)

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
    ) -> TicketMessageConnection:
        return await messages_of(info, int(self.id), first, after, last, before)

    @strawberry.field(
        description="Every change of status, priority, assignee and title, oldest first "
        "(`first` 1 to 200 after `after`)."
    )
    async def history(
        self, info: strawberry.Info, first: int = 50, after: str | None = None
    ) -> TicketHistoryConnection:
        return await history_of(info, int(self.id), first, after)


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


# --- A ticket's conversation (docs/graphql.md, "Conversation"): its messages with their files
# and e-mail deliveries, its history, and the Relay-style connections `Ticket.messages` and
# `Ticket.history`. A page of tickets reads every ticket's thread in one batch (the request's
# `threads` and `histories` loaders, desk.reads.threads): a fixed number of statements however
# long the list. A note, its files and its deliveries are staff's; a customer is never told one
# exists.

N = TypeVar("N")


@strawberry.enum(description="Where one e-mail of a message stands.")
class DeliveryState(Enum):
    SENDING = "sending"
    DELIVERED = "delivered"
    RETRYING = "retrying"
    FAILED = "failed"
    CANCELLED = "cancelled"


@strawberry.enum(description="Which field of a ticket a history entry changed.")
class HistoryField(Enum):
    STATUS = "status"
    PRIORITY = "priority"
    ASSIGNEE = "assignee"
    TITLE = "title"


@strawberry.type(description="A file of a message.")
class Attachment:
    id: ID
    filename: str
    content_type: str = strawberry.field(description="Sniffed from the bytes, never the sender's.")
    size: int = strawberry.field(description="Bytes.")
    is_image: bool
    created_at: datetime
    download_url: str = strawberry.field(
        description="For a signed-in page (session cookie); with an API token use "
        "`/api/v1/attachments/{id}`. Either answers 404 to anyone who may not see the message."
    )

    @classmethod
    def from_model(cls, a: AttachmentRow) -> Attachment:
        return cls(
            id=ID(str(a.id)),
            filename=a.filename,
            content_type=a.content_type,
            size=a.size,
            is_image=a.is_image,
            created_at=a.created_at,
            download_url=f"/attachments/{a.id}",
        )


@strawberry.type(description="One e-mail a message sent (staff see these; customers never).")
class MessageDelivery:
    task_id: ID = strawberry.field(description="The EMAIL task that sends it (`task(id)`).")
    recipient_name: str
    state: DeliveryState
    server_reply: str | None = strawberry.field(
        description="What the mail server answered, while retrying or once failed."
    )
    attempts: int
    recipient_id: Private[int | None]

    @classmethod
    def from_model(cls, d: Delivery) -> MessageDelivery:
        return cls(
            task_id=ID(str(d.task_id)),
            recipient_name=d.recipient_name,
            state=DeliveryState(d.state),
            server_reply=d.reply,
            attempts=d.attempts,
            recipient_id=d.recipient_id,
        )

    @strawberry.field
    async def recipient(self, info: strawberry.Info) -> User | None:
        return await _user(info, self.recipient_id)


@strawberry.type(description="A public reply or (staff only) an internal note. Never edited.")
class TicketMessage:
    id: ID
    internal: bool = strawberry.field(description="An internal note: staff's only.")
    body: str = strawberry.field(description="Plain text; empty once redacted.")
    created_at: datetime
    redacted_at: datetime | None
    attachments: list[Attachment]
    deliveries: list[MessageDelivery] = strawberry.field(
        description="Its e-mails' delivery, for staff; always empty for customers."
    )
    ticket_id: Private[int]
    author_id: Private[int | None]
    redacted_by_id: Private[int | None]

    @classmethod
    def from_view(cls, view: MessageView) -> TicketMessage:
        m = view.message
        return cls(
            id=ID(str(m.id)),
            internal=m.internal,
            body=m.body,
            created_at=m.created_at,
            redacted_at=m.redacted_at,
            attachments=[Attachment.from_model(a) for a in view.files],
            deliveries=[MessageDelivery.from_model(d) for d in view.deliveries],
            ticket_id=m.ticket_id,
            author_id=m.author_id,
            redacted_by_id=m.redacted_by,
        )

    @strawberry.field
    async def ticket(self, info: strawberry.Info) -> Ticket | None:
        row = await ctx_of(info).loaders.tickets.load(self.ticket_id)
        return Ticket.from_model(row) if row else None

    @strawberry.field(description="Null when the account is gone.")
    async def author(self, info: strawberry.Info) -> User | None:
        return await _user(info, self.author_id)

    @strawberry.field(description="The admin who redacted it.")
    async def redacted_by(self, info: strawberry.Info) -> User | None:
        return await _user(info, self.redacted_by_id)


@strawberry.type(
    description="One recorded change of a ticket's status, priority, assignee or title."
)
class TicketHistoryEntry:
    id: ID
    field: HistoryField
    from_: str | None = strawberry.field(
        name="from", description="The value before (an assignee: the user's id; null: nobody)."
    )
    to: str | None = strawberry.field(description="The value after, as `from`.")
    at: datetime
    actor_id: Private[int | None]

    @classmethod
    def from_model(cls, c: thread.Change) -> TicketHistoryEntry:
        return cls(
            id=ID(str(c.id)),
            field=HistoryField(c.field),
            from_=c.old_value,
            to=c.new_value,
            at=c.at,
            actor_id=c.actor_id,
        )

    @strawberry.field(description="Who made the change (null: the system, or a gone account).")
    async def actor(self, info: strawberry.Info) -> User | None:
        return await _user(info, self.actor_id)

    @strawberry.field(description="For an assignee change: the previous assignee.")
    async def from_user(self, info: strawberry.Info) -> User | None:
        return await self._person(info, self.from_)

    @strawberry.field(description="For an assignee change: the new assignee.")
    async def to_user(self, info: strawberry.Info) -> User | None:
        return await self._person(info, self.to)

    async def _person(self, info: strawberry.Info, value: str | None) -> User | None:
        if self.field is not HistoryField.ASSIGNEE:
            return None
        return await _user(info, inputs.optional_id(value))


@strawberry.type(description="Where a page of a thread or history sits in the whole.")
class ThreadPageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@strawberry.type
class TicketMessageConnection:
    edges: list[Edge[TicketMessage]]
    page_info: ThreadPageInfo

    @strawberry.field
    def nodes(self) -> list[TicketMessage]:
        return [e.node for e in self.edges]


@strawberry.type
class TicketHistoryConnection:
    edges: list[Edge[TicketHistoryEntry]]
    page_info: ThreadPageInfo

    @strawberry.field
    def nodes(self) -> list[TicketHistoryEntry]:
        return [e.node for e in self.edges]


def cursor(kind: str, item_id: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{item_id}".encode()).decode()


def parse_cursor(kind: str, value: str | None, field: str) -> int | None:
    """The id a cursor of this list stands for; anything else fails with VALIDATION on
    `field`, as the ticket list's `after` does."""
    if value is None:
        return None
    raw = inputs.cursor(field, value)
    try:
        got_kind, _, item = base64.urlsafe_b64decode(raw.encode()).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        got_kind, item = "", ""
    found = inputs.optional_id(item) if got_kind == kind else None
    if found is None:
        fail(ValidationProblem(field, "not a cursor this list gave out"))
    return found


def _size(name: str, value: int) -> int:
    if not 1 <= value <= thread.MAX_PAGE:
        fail(ValidationProblem(name, f"between 1 and {thread.MAX_PAGE}"))
    return value


def _page_info(kind: str, page: thread.Page[N] | None, ids: list[int]) -> ThreadPageInfo:
    """A desk page's place in the whole (None: an empty list), its ends as cursors of `kind`."""
    return ThreadPageInfo(
        has_next_page=page.has_next if page else False,
        has_previous_page=page.has_previous if page else False,
        start_cursor=cursor(kind, ids[0]) if ids else None,
        end_cursor=cursor(kind, ids[-1]) if ids else None,
    )


async def messages_of(
    info: strawberry.Info,
    ticket_id: int,
    first: int,
    after: str | None,
    last: int | None,
    before: str | None,
) -> TicketMessageConnection:
    """`Ticket.messages`: `first` after `after` in thread order, or with `last` the last ones
    before `before`; empty for a ticket the reader no longer sees."""
    ctx = ctx_of(info)
    size = _size("last", last) if last is not None else _size("first", first)
    key = (
        ticket_id,
        size,
        parse_cursor("m", after, "after"),
        parse_cursor("m", before, "before"),
        last is not None,
    )
    window = await ctx.loaders.threads.load(key)
    if window is None:
        return TicketMessageConnection(edges=[], page_info=_page_info("m", None, []))
    views = window.page.items
    ctx.spend(sum(len(v.message.body) for v in views))
    ids = [v.message.id for v in views]
    return TicketMessageConnection(
        edges=[
            Edge(cursor=cursor("m", v.message.id), node=TicketMessage.from_view(v)) for v in views
        ],
        page_info=_page_info("m", window.page, ids),
    )


async def history_of(
    info: strawberry.Info, ticket_id: int, first: int, after: str | None
) -> TicketHistoryConnection:
    """`Ticket.history`: the first `first` entries after `after`, oldest first."""
    ctx = ctx_of(info)
    key = (ticket_id, _size("first", first), parse_cursor("h", after, "after"))
    page = await ctx.loaders.histories.load(key)
    if page is None:
        return TicketHistoryConnection(edges=[], page_info=_page_info("h", None, []))
    ctx.spend(sum(len(c.old_value or "") + len(c.new_value or "") for c in page.items))
    return TicketHistoryConnection(
        edges=[
            Edge(cursor=cursor("h", c.id), node=TicketHistoryEntry.from_model(c))
            for c in page.items
        ],
        page_info=_page_info("h", page, [c.id for c in page.items]),
    )
