"""SQLModel tables: people, teams, tickets, notifications, API tokens and the task ledger."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlmodel import Field, SQLModel

TZ = sa.DateTime(timezone=True)


class Role(StrEnum):
    ADMIN = "ADMIN"
    STAFF = "STAFF"
    CUSTOMER = "CUSTOMER"

    @property
    def is_staff(self) -> bool:
        """Admins and staff work on all of the team's tickets; customers on their own."""
        return self in (Role.ADMIN, Role.STAFF)


class TicketStatus(StrEnum):
    OPEN = "OPEN"
    PENDING = "PENDING"
    RESOLVED = "RESOLVED"
    CLOSED = "CLOSED"


class Priority(StrEnum):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"
    URGENT = "URGENT"


class TaskKind(StrEnum):
    EXPORT = "EXPORT"
    REMINDER = "REMINDER"
    IMPORT = "IMPORT"
    NOOP = "NOOP"  # benchmarks and tests only
    EMAIL = "EMAIL"  # one message to one address (desk/work/mail.py)
    MAIL_FETCH = "MAIL_FETCH"  # one fetch of one mailbox (desk/work/fetch.py)
    MAIL_PARSE = "MAIL_PARSE"  # a mailbox's fetched messages into tickets (desk/work/mail_parse.py)
    SLA_TIMER = "SLA_TIMER"  # a ticket's SLA warning or breach, at its instant
    TIME_RULE = "TIME_RULE"  # one run of a team's time rules over its tickets


class TaskStatus(StrEnum):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


ACTIVE_STATUSES = (TaskStatus.WAITING, TaskStatus.RUNNING)
TERMINAL_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)
CLOSED_TICKET = (TicketStatus.RESOLVED, TicketStatus.CLOSED)


def _now_col(**kw: Any) -> Any:
    return Field(sa_column=sa.Column(TZ, nullable=False, server_default=sa.func.now(), **kw))


def _tz(nullable: bool = True, **kw: Any) -> Any:
    return Field(default=None, sa_column=sa.Column(TZ, nullable=nullable, **kw))


def _check_in(column: str, enum: type[StrEnum]) -> sa.CheckConstraint:
    values = ", ".join(f"'{m.value}'" for m in enum)
    return sa.CheckConstraint(f"{column} IN ({values})", name=f"{column}_valid")


class User(SQLModel, table=True):
    __tablename__ = "app_user"
    __table_args__ = (sa.Index("app_user_email_key", sa.func.lower(sa.text("email")), unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    email: str = Field(max_length=320)
    display_name: str = Field(max_length=200)
    password_hash: str = Field(default="", max_length=500, sa_column_kwargs={"server_default": ""})
    locale: str = Field(default="en", max_length=20, sa_column_kwargs={"server_default": "en"})
    timezone: str = Field(default="UTC", max_length=64, sa_column_kwargs={"server_default": "UTC"})
    created_at: datetime = _now_col()


class Team(SQLModel, table=True):
    __tablename__ = "team"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200, sa_column_kwargs={"unique": True})
    created_at: datetime = _now_col()


class Membership(SQLModel, table=True):
    __tablename__ = "membership"
    __table_args__ = (_check_in("role", Role),)

    user_id: int = Field(foreign_key="app_user.id", primary_key=True, ondelete="CASCADE")
    team_id: int = Field(foreign_key="team.id", primary_key=True, ondelete="CASCADE", index=True)
    role: str = Field(max_length=20)
    created_at: datetime = _now_col()


class Ticket(SQLModel, table=True):
    __tablename__ = "ticket"
    __table_args__ = (
        _check_in("status", TicketStatus),
        _check_in("priority", Priority),
        sa.Index(
            "ticket_team_status_priority_created", "team_id", "status", "priority", "created_at"
        ),
        sa.Index("ticket_team_created", "team_id", sa.text("created_at DESC"), sa.text("id DESC")),
        sa.Index("ticket_team_creator", "team_id", "creator_id"),
        sa.Index("ticket_team_assignee", "team_id", "assignee_id"),
        sa.Index(
            "ticket_title_trgm",
            "title",
            postgresql_using="gin",
            postgresql_ops={"title": "gin_trgm_ops"},
        ),
        # Words pg_trgm cannot index (退款, two letters): the title's bigrams (migration 0010).
        sa.Index(
            "ticket_title_bigrams", sa.text("taskdesk_bigrams(title)"), postgresql_using="gin"
        ),
        sa.Index("ticket_team_external_id", "team_id", "external_id", unique=True),
        sa.Index(
            "ticket_team_sla_due",
            "team_id",
            "sla_due_at",
            postgresql_where=sa.text("sla_due_at IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    title: str = Field(max_length=500)
    body: str = Field(default="", sa_column_kwargs={"server_default": ""})
    status: str = Field(default="OPEN", max_length=20, sa_column_kwargs={"server_default": "OPEN"})
    priority: str = Field(
        default="NORMAL", max_length=20, sa_column_kwargs={"server_default": "NORMAL"}
    )
    creator_id: int = Field(foreign_key="app_user.id")
    assignee_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    reminder_revision: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    external_id: str | None = Field(default=None, max_length=200)
    # The conversation's figures (desk/helpdesk/thread.py keeps them with each message): public
    # messages, the first staff reply, the latest public one.
    message_count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    first_response_at: datetime | None = _tz()
    last_public_reply_at: datetime | None = _tz()
    # The clocks' facts (docs/architecture.md, "Business hours"): every change an SLA timer or
    # a time rule must see (a reply, a status or priority change) bumps `revision`, so work
    # planned for an earlier revision is superseded; `status_since` is when the status was
    # entered (NULL: at creation); the soonest running SLA due time and the first breach.
    revision: int = Field(
        default=0, sa_type=sa.BigInteger, sa_column_kwargs={"server_default": "0"}
    )
    status_since: datetime | None = _tz()
    sla_due_at: datetime | None = _tz()
    sla_breached_at: datetime | None = _tz()
    created_at: datetime = _now_col()
    updated_at: datetime = _now_col()


class Notification(SQLModel, table=True):
    __tablename__ = "notification"
    __table_args__ = (
        sa.Index("notification_user_created", "user_id", sa.text("id DESC")),
        sa.Index(
            "notification_user_unread", "user_id", postgresql_where=sa.text("read_at IS NULL")
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE")
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    task_id: int | None = Field(default=None)
    kind: str = Field(max_length=40)
    text: str  # stable English; pages render text_key/text_params in the reader's language
    text_key: str | None = Field(default=None, max_length=100)
    text_params: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(pg.JSONB, nullable=False, server_default="{}")
    )
    link: str = Field(default="", max_length=500, sa_column_kwargs={"server_default": ""})
    read_at: datetime | None = _tz()
    created_at: datetime = _now_col()


class ApiToken(SQLModel, table=True):
    __tablename__ = "api_token"

    id: int | None = Field(default=None, primary_key=True)
    owner_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE", index=True)
    name: str = Field(max_length=200)
    prefix: str = Field(max_length=32)
    token_sha256: str = Field(max_length=64, sa_column_kwargs={"unique": True})
    scopes: list[str] = Field(
        default_factory=list,
        sa_column=sa.Column(pg.ARRAY(sa.Text), nullable=False, server_default="{}"),
    )
    created_at: datetime = _now_col()
    last_used_at: datetime | None = _tz()
    revoked_at: datetime | None = _tz()


class BackgroundTask(SQLModel, table=True):
    """The ledger: one row per unit of background work; the only truth about its state."""

    # Storage: `fillfactor = 50` (migration 0009, which Alembic does not compare) keeps room on
    # each page, so a send (only `dispatched_at`/`sends` change) is an in-place HOT update.
    __tablename__ = "background_task"
    __table_args__ = (
        _check_in("kind", TaskKind),
        _check_in("status", TaskStatus),
        sa.CheckConstraint("progress >= 0 AND progress <= 1", name="progress_range"),
        sa.CheckConstraint("run >= 1 AND attempts >= 0 AND max_attempts >= 1", name="counters"),
        sa.CheckConstraint(
            "kind = 'EMAIL' OR (team_id IS NOT NULL AND owner_id IS NOT NULL)",
            name="team_owner_set",
        ),
        sa.Index("background_task_team_owner_created", "team_id", "owner_id", sa.text("id DESC")),
        sa.Index("background_task_team_created", "team_id", sa.text("id DESC")),
        # The accept's hourly quota count reads only the last hour (migration 0017).
        sa.Index("background_task_owner_kind_created", "team_id", "owner_id", "kind", "created_at"),
        sa.Index(
            "background_task_due",
            "run_at",
            postgresql_where=sa.text("status = 'WAITING'"),
        ),
        sa.Index(
            "background_task_lease",
            "lease_until",
            postgresql_where=sa.text("status = 'RUNNING'"),
        ),
        sa.Index(
            "background_task_expiring",
            "expires_at",
            postgresql_where=sa.text("result_bytes IS NOT NULL"),
        ),
        sa.Index(
            "background_task_finished",
            "finished_at",
            postgresql_where=sa.text("finished_at IS NOT NULL"),
        ),
        # A ticket's waiting SLA timers, which each replan ends (migration 0021).
        sa.Index(
            "background_task_sla_waiting",
            "ticket_id",
            postgresql_where=sa.text("kind = 'SLA_TIMER' AND status = 'WAITING'"),
        ),
        # "One active task per idempotency scope" is a database fact, not a code path.
        sa.Index(
            "background_task_one_active_per_scope",
            "kind",
            "team_id",
            "scope_key",
            unique=True,
            postgresql_where=sa.text("status IN ('WAITING', 'RUNNING')"),
        ),
        # A client's idempotency key names one task of its owner (Stripe-style; docs/architecture.md,
        # "Ledger").
        sa.Index(
            "background_task_owner_idempotency_key",
            "owner_id",
            "idempotency_key",
            unique=True,
            postgresql_where=sa.text("idempotency_key IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=20)
    # NULL only in an EMAIL with no team (a password reset) or no account yet (an invitation):
    # the CHECK `team_owner_set` keeps every other kind's pair set, so its readers may trust it.
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE", nullable=True)
    owner_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE", nullable=True)
    ticket_id: int | None = Field(default=None, foreign_key="ticket.id", ondelete="CASCADE")

    scope_key: str = Field(max_length=200)
    filters: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(pg.JSONB, nullable=False, server_default="{}")
    )
    scope_creator_id: int | None = Field(default=None)
    reminder_revision: int | None = Field(default=None)
    note: str = Field(default="", max_length=1000, sa_column_kwargs={"server_default": ""})
    run_at: datetime = _now_col()
    idempotency_key: str | None = Field(default=None, max_length=100)
    request_fingerprint: str | None = Field(default=None, max_length=64)

    status: str = Field(
        default="WAITING", max_length=20, sa_column_kwargs={"server_default": "WAITING"}
    )
    progress: float = Field(default=0.0, sa_column_kwargs={"server_default": "0"})
    progress_current: int = Field(
        default=0, sa_type=sa.BigInteger, sa_column_kwargs={"server_default": "0"}
    )
    progress_total: int | None = Field(default=None, sa_type=sa.BigInteger)
    progress_message: str = Field(
        default="", max_length=500, sa_column_kwargs={"server_default": ""}
    )
    attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    max_attempts: int = Field(default=5, sa_column_kwargs={"server_default": "5"})
    last_error: str | None = Field(default=None)  # stable English
    error_key: str | None = Field(default=None, max_length=100)  # desk.core.messages key
    error_params: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(pg.JSONB, nullable=False, server_default="{}")
    )
    cancel_requested: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})

    run: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    # Hand-offs to Redis so far (all rounds): every send gets the arq job id
    # `task:{id}:{run}:{sends}`, one never used before (arq refuses an id it still knows).
    sends: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    execution_id: str | None = Field(default=None, max_length=64)
    dispatched_at: datetime | None = _tz()
    lease_until: datetime | None = _tz()
    started_at: datetime | None = _tz()

    stats: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(pg.JSONB, nullable=False, server_default="{}")
    )
    result_summary: str | None = Field(default=None)  # stable English
    summary_key: str | None = Field(default=None, max_length=100)  # desk.core.messages key
    summary_params: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(pg.JSONB, nullable=False, server_default="{}")
    )
    result_skipped: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    result_bytes: int | None = Field(default=None, sa_type=sa.BigInteger)
    expires_at: datetime | None = _tz()
    finished_at: datetime | None = _tz()
    created_at: datetime = _now_col()
    updated_at: datetime = _now_col()


class TaskLane(SQLModel, table=True):
    """An operator's pause of a lane (desk/ledger/lanes.py): its tasks are accepted but stay unsent.
    No row means the lane was never paused."""

    __tablename__ = "task_lane"

    name: str = Field(primary_key=True, max_length=20)
    paused: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    paused_by_id: int | None = Field(
        default=None, foreign_key="app_user.id", ondelete="SET NULL", nullable=True
    )
    paused_at: datetime | None = _tz()
    updated_at: datetime = _now_col()


class TaskResultChunk(SQLModel, table=True):
    """Stored export output, split in chunks; only the chunks of the committing execution count."""

    __tablename__ = "task_result_chunk"

    task_id: int = Field(foreign_key="background_task.id", primary_key=True, ondelete="CASCADE")
    execution_id: str = Field(primary_key=True, max_length=64)
    seq: int = Field(primary_key=True)
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))


class Upload(SQLModel, table=True):
    """A file someone uploaded for a task (an import's CSV), kept in PostgreSQL with it."""

    __tablename__ = "upload"

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE", index=True)
    owner_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE")
    filename: str = Field(max_length=300)
    size: int = Field(sa_type=sa.BigInteger)
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    created_at: datetime = _now_col()


class ImportRejection(SQLModel, table=True):
    """One rejected row of an import: the error report. Keyed by row, so a rescued run
    that sees the row again records it once."""

    __tablename__ = "import_rejection"

    task_id: int = Field(foreign_key="background_task.id", primary_key=True, ondelete="CASCADE")
    row_number: int = Field(primary_key=True)
    column_name: str = Field(max_length=100)
    reason: str = Field(max_length=500)


class WebSession(SQLModel, table=True):
    """A signed-in browser: the cookie carries `id` (random, unguessable); ending it server-side
    (logout, password change, member removal) is setting `revoked_at`."""

    __tablename__ = "web_session"

    id: str = Field(primary_key=True, max_length=64)
    user_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE", index=True)
    csrf: str = Field(max_length=64)
    created_at: datetime = _now_col()
    expires_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    revoked_at: datetime | None = _tz()


# Tasks with an error (failed, retrying, or retried): the console's failure groups and error
# search read these instead of the whole ledger. Declared beside the table to leave its
# __table_args__ to the ledger's own indexes.
sa.Index(
    "background_task_errors",
    BackgroundTask.__table__.c.id,  # type: ignore[attr-defined]
    postgresql_where=sa.text("last_error IS NOT NULL"),
)


class SiteOperator(SQLModel, table=True):
    """A site-level operator: sees and steers every team's tasks in the console (CLI-granted)."""

    __tablename__ = "site_operator"

    user_id: int = Field(foreign_key="app_user.id", primary_key=True, ondelete="CASCADE")
    created_at: datetime = _now_col()


class OpsAudit(SQLModel, table=True):
    """One console (or operators CLI) action: who, what, which tasks, when."""

    __tablename__ = "ops_audit"
    __table_args__ = (
        sa.Index("ops_audit_team", "team_id", sa.text("id DESC")),
        sa.Index("ops_audit_tasks", "task_ids", postgresql_using="gin"),
    )

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    actor_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    actor: str = Field(max_length=320)
    action: str = Field(max_length=40)
    team_id: int | None = Field(default=None, foreign_key="team.id", ondelete="CASCADE")
    task_ids: list[int] = Field(
        default_factory=list,
        sa_column=sa.Column(pg.ARRAY(sa.BigInteger), nullable=False, server_default="{}"),
    )
    count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    detail: str = Field(default="", sa_column_kwargs={"server_default": ""})


class TaskEvent(SQLModel, table=True):
    """The append-only story of a task, written by a trigger on background_task (migration
    0007) so no ledger statement has to remember it."""

    __tablename__ = "task_event"
    __table_args__ = (
        sa.Index("task_event_task", "task_id", "id"),
        sa.Index("task_event_at", "at"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.BigInteger)
    task_id: int = Field(foreign_key="background_task.id", ondelete="CASCADE")
    at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    event: str = Field(max_length=20)
    run: int
    attempt: int
    execution_id: str | None = Field(default=None, max_length=64)
    worker_id: str | None = Field(default=None, max_length=200)
    detail: str = Field(default="", sa_column_kwargs={"server_default": ""})


# --- scheduled exports (docs/architecture.md, "Scheduled exports") ---------------------------


class ExportSchedule(SQLModel, table=True):
    """An export's saved filters run on chosen ISO weekdays at a local time in a time zone.
    `next_run_at` (UTC) is the next occurrence; the scheduler (jobs/scheduler.py) claims due rows
    and advances them in the transaction that creates the occurrence's EXPORT task."""

    __tablename__ = "export_schedule"
    __table_args__ = (
        sa.Index(
            "export_schedule_due",
            "next_run_at",
            postgresql_where=sa.text("paused_at IS NULL AND stopped_at IS NULL"),
        ),
        sa.Index("export_schedule_team", "team_id", "id"),
        sa.CheckConstraint(
            "cardinality(days) BETWEEN 1 AND 7 AND days <@ CAST('{1,2,3,4,5,6,7}' AS smallint[])",
            name="export_schedule_days_valid",
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    owner_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE", index=True)
    name: str = Field(max_length=200)
    filters: dict[str, Any] = Field(
        default_factory=dict, sa_column=sa.Column(pg.JSONB, nullable=False)
    )
    days: list[int] = Field(
        default_factory=list, sa_column=sa.Column(pg.ARRAY(sa.SmallInteger), nullable=False)
    )
    local_time: str = Field(max_length=5)  # HH:MM, 24-hour
    timezone: str = Field(max_length=64)
    next_run_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    paused_at: datetime | None = _tz()
    stopped_at: datetime | None = _tz()
    stopped_reason: str | None = Field(default=None, max_length=64)  # a message key
    last_run_at: datetime | None = _tz()
    last_task_id: int | None = Field(
        default=None, foreign_key="background_task.id", ondelete="SET NULL"
    )
    last_skip_reason: str | None = Field(default=None, max_length=64)  # a message key
    created_at: datetime = _now_col()
    updated_at: datetime = _now_col()


class ScheduleRun(SQLModel, table=True):
    """One occurrence of a schedule: the task it made, or why it made none. The primary key is
    the occurrence, so a second task for one occurrence cannot even be recorded."""

    __tablename__ = "schedule_run"

    schedule_id: int = Field(foreign_key="export_schedule.id", primary_key=True, ondelete="CASCADE")
    occurrence_at: datetime = Field(sa_column=sa.Column(TZ, primary_key=True))
    ran_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    task_id: int | None = Field(
        default=None, foreign_key="background_task.id", ondelete="SET NULL", index=True
    )
    outcome: str = Field(max_length=64)  # "created", or a message key saying why not


# --- e-mail (desk/work/mail.py) -----------------------------------------------------------------


class NotificationPreference(SQLModel, table=True):
    """What one person wants by e-mail beside the in-app notification; no row: nothing."""

    __tablename__ = "notification_preference"

    user_id: int = Field(foreign_key="app_user.id", primary_key=True, ondelete="CASCADE")
    export_ready_email: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    reminder_email: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    sla_email: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    # Staff: a customer's reply to a ticket of theirs (assigned, or the team's when unassigned).
    # On unless turned off; customers always get the replies to their tickets.
    ticket_reply_email: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    updated_at: datetime = _now_col()


# --- Onboarding: invitations and password resets (docs/architecture.md, "Onboarding") ---------
# Both keep only the SHA-256 of their link's token: a leaked table opens no account.


class Invitation(SQLModel, table=True):
    """An admin's (or the CLI's) invitation of an e-mail address to a team with a role. Live while
    not accepted, not revoked (or replaced) and before `expires_at`; at most one live per address
    and team (a new one replaces it)."""

    __tablename__ = "invitation"
    __table_args__ = (
        _check_in("role", Role),
        sa.Index(
            "invitation_pending",
            "team_id",
            sa.func.lower(sa.text("email")),
            unique=True,
            postgresql_where=sa.text("accepted_at IS NULL AND revoked_at IS NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    email: str = Field(max_length=320)
    role: str = Field(max_length=20)
    token_sha256: str = Field(max_length=64, sa_column_kwargs={"unique": True})
    created_by: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    created_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    expires_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    accepted_at: datetime | None = _tz()
    accepted_by: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    revoked_at: datetime | None = _tz()


class PasswordReset(SQLModel, table=True):
    """One e-mailed password-reset link: single-use, expires."""

    __tablename__ = "password_reset"

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE", index=True)
    token_sha256: str = Field(max_length=64, sa_column_kwargs={"unique": True})
    created_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    expires_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    used_at: datetime | None = _tz()
