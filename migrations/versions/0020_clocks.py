"""clocks: SLA policies and time rules per team, the facts a ticket's clocks read, the alerts
and rule actions fired once per ticket revision; mailboxes that hold strangers' mail

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 13:30:00

See docs/architecture.md, "Business hours" and "Mail in". Expand only: four new tables, columns
that are nullable or have a server default, indexes, and the task kinds `SLA_TIMER` and
`TIME_RULE` join the CHECK `kind_valid` (looser: every kind an older release writes is valid).
`status_since` is filled from each ticket's history, where it has one.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)
KINDS_BEFORE = (
    "kind IN ('EXPORT', 'REMINDER', 'IMPORT', 'NOOP', 'EMAIL', 'MAIL_FETCH', 'MAIL_PARSE')"
)
KINDS_AFTER = (
    "kind IN ('EXPORT', 'REMINDER', 'IMPORT', 'NOOP', 'EMAIL', 'MAIL_FETCH', 'MAIL_PARSE', "
    "'SLA_TIMER', 'TIME_RULE')"
)


def _team(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), nullable=False)  # fmt: skip


def _ticket() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("ticket_id", sa.Integer(), sa.ForeignKey("ticket.id", ondelete="CASCADE"), nullable=False)  # fmt: skip


def _by() -> sa.Column:  # type: ignore[type-arg]
    return sa.Column("updated_by_id", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="SET NULL"), nullable=True)  # fmt: skip


def _at(name: str) -> sa.Column:  # type: ignore[type-arg]
    return sa.Column(name, TZ, server_default=sa.func.now(), nullable=False)


def upgrade() -> None:
    op.drop_constraint("kind_valid", "background_task", type_="check")
    op.create_check_constraint("kind_valid", "background_task", KINDS_AFTER)
    op.add_column("ticket", sa.Column("revision", sa.BigInteger(), server_default="0", nullable=False))  # fmt: skip
    for name in ("status_since", "sla_due_at", "sla_breached_at"):
        op.add_column("ticket", sa.Column(name, TZ, nullable=True))
    op.create_index(
        "ticket_team_sla_due", "ticket", ["team_id", "sla_due_at"],
        postgresql_where=sa.text("sla_due_at IS NOT NULL"),
    )  # fmt: skip
    op.execute(
        "UPDATE ticket t SET status_since = h.at FROM (SELECT ticket_id, max(at) AS at"
        " FROM ticket_history WHERE field = 'status' GROUP BY ticket_id) h WHERE h.ticket_id = t.id"
    )
    op.create_table(
        "team_sla_policy",
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("calendar", pg.JSONB(), nullable=False),
        sa.Column("targets", pg.JSONB(), nullable=False),
        sa.Column("warn_share", sa.Float(), server_default="0.75", nullable=False),
        _by(), _at("updated_at"),
    )  # fmt: skip
    op.create_table(
        "team_time_rules",
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("close_resolved_after", sa.Integer(), nullable=True),
        sa.Column("remind_pending_after", sa.Integer(), nullable=True),
        sa.Column("resolve_pending_after", sa.Integer(), nullable=True),
        _by(), _at("updated_at"),
    )  # fmt: skip
    op.create_table(
        "ticket_clock_alert",
        sa.Column("id", sa.Integer(), primary_key=True),
        _ticket(),
        sa.Column("target", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("due_at", TZ, nullable=False),
        _at("fired_at"),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        sa.UniqueConstraint("ticket_id", "target", "kind", "revision", name="ticket_clock_alert_once"),
    )  # fmt: skip
    op.create_table(
        "ticket_rule_action",
        sa.Column("id", sa.Integer(), primary_key=True),
        _team("team_id"), _ticket(),
        sa.Column("rule", sa.String(10), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("task_id", sa.BigInteger(), nullable=True),
        _at("acted_at"),
        sa.UniqueConstraint("ticket_id", "rule", "revision", name="ticket_rule_action_once"),
    )  # fmt: skip
    op.create_index("ticket_rule_action_team_acted", "ticket_rule_action", ["team_id", sa.text("acted_at DESC")])  # fmt: skip
    op.create_index("ticket_rule_action_task", "ticket_rule_action", ["task_id"])
    op.add_column("mailbox", sa.Column("staff_only", sa.Boolean(), server_default=sa.false(), nullable=False))  # fmt: skip
    op.add_column("inbound_mail", sa.Column("sender", sa.String(320), nullable=True))
    op.create_index("inbound_mail_sender", "inbound_mail", ["mailbox_id", "sender", "received_at"])  # fmt: skip


def downgrade() -> None:
    op.drop_index("inbound_mail_sender", "inbound_mail")
    op.drop_column("inbound_mail", "sender")
    op.drop_column("mailbox", "staff_only")
    op.drop_table("ticket_rule_action")
    op.drop_table("ticket_clock_alert")
    op.drop_table("team_time_rules")
    op.drop_table("team_sla_policy")
    op.drop_index("ticket_team_sla_due", "ticket")
    for name in ("sla_breached_at", "sla_due_at", "status_since", "revision"):
        op.drop_column("ticket", name)
    op.execute("DELETE FROM background_task WHERE kind IN ('SLA_TIMER', 'TIME_RULE')")
    op.drop_constraint("kind_valid", "background_task", type_="check")
    op.create_check_constraint("kind_valid", "background_task", KINDS_BEFORE)
