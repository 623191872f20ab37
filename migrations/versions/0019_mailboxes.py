"""mailboxes: a team's IMAP mailboxes and every message fetched from them, kept raw

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 11:30:00

See docs/architecture.md, "Mail in". Expand only: two new tables, and the task kinds
`MAIL_FETCH` and `MAIL_PARSE` join the CHECK `kind_valid` (a looser constraint: every kind an
older release writes is still valid).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)
KINDS_BEFORE = "kind IN ('EXPORT', 'REMINDER', 'IMPORT', 'NOOP', 'EMAIL')"
KINDS_AFTER = (
    "kind IN ('EXPORT', 'REMINDER', 'IMPORT', 'NOOP', 'EMAIL', 'MAIL_FETCH', 'MAIL_PARSE')"
)


def upgrade() -> None:
    op.drop_constraint("kind_valid", "background_task", type_="check")
    op.create_check_constraint("kind_valid", "background_task", KINDS_AFTER)
    op.create_table(
        "mailbox",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_by_id", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="CASCADE"), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("port", sa.Integer(), server_default="993", nullable=False),
        sa.Column("use_tls", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("username", sa.String(320), nullable=False),
        sa.Column("password_enc", sa.LargeBinary(), nullable=False),
        sa.Column("folder", sa.String(200), server_default="INBOX", nullable=False),
        sa.Column("cadence_seconds", sa.Integer(), server_default="30", nullable=False),
        sa.Column("uidvalidity", sa.BigInteger(), nullable=True),
        sa.Column("last_uid", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_fetch_at", TZ, nullable=True),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("created_at", TZ, server_default=sa.func.now(), nullable=False),
    )  # fmt: skip
    op.create_index("ix_mailbox_team_id", "mailbox", ["team_id"])
    op.create_table(
        "inbound_mail",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("mailbox_id", sa.Integer(), sa.ForeignKey("mailbox.id", ondelete="CASCADE"), nullable=False),
        sa.Column("uidvalidity", sa.BigInteger(), nullable=False),
        sa.Column("uid", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.String(1000), nullable=True),
        sa.Column("raw", sa.LargeBinary(), nullable=False),
        sa.Column("received_at", TZ, nullable=False),
        sa.Column("parsed_at", TZ, nullable=True),
        sa.Column("outcome", sa.String(20), nullable=True),
        sa.Column("ticket_id", sa.Integer(), sa.ForeignKey("ticket.id", ondelete="SET NULL"), nullable=True),
        sa.Column("ticket_message_id", sa.Integer(), sa.ForeignKey("ticket_message.id", ondelete="SET NULL"), nullable=True),
        sa.Column("problem", sa.String(), nullable=True),
        sa.UniqueConstraint("mailbox_id", "uidvalidity", "uid", name="inbound_mail_uid"),
    )  # fmt: skip
    op.create_index(
        "inbound_mail_unparsed", "inbound_mail", ["mailbox_id"],
        postgresql_where=sa.text("parsed_at IS NULL"),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("inbound_mail")
    op.drop_table("mailbox")
    op.execute("DELETE FROM background_task WHERE kind IN ('MAIL_FETCH', 'MAIL_PARSE')")
    op.drop_constraint("kind_valid", "background_task", type_="check")
    op.create_check_constraint("kind_valid", "background_task", KINDS_BEFORE)
