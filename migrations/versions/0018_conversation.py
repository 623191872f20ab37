"""conversation: a ticket's messages (replies and internal notes), their attachments, the
e-mails they sent and the ticket's history; today's bodies become the opening messages

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 04:00:00

See docs/architecture.md, "Conversation". Expand only: `ticket.body` stays (older code reads
it, and the opening message is a copy of it), every new column has a default, no old statement
changes meaning. The change feed gains `k:` notices — ticket ids whose thread, history or fields
changed — from statement-level triggers on the new tables and on `ticket` (as migration 0011's),
so an open ticket page learns of a new message at commit without polling the database.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TZ = sa.DateTime(timezone=True)

FEED_FUNCTION = r"""
CREATE OR REPLACE FUNCTION taskdesk_feed_threads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM taskdesk_feed_notify('k:', (SELECT array_agg(DISTINCT {item}) FROM old_rows r));
  ELSE
    PERFORM taskdesk_feed_notify('k:', (SELECT array_agg(DISTINCT {item}) FROM new_rows r));
  END IF;
  RETURN NULL;
END
$$;
"""
# table: (the ticket id of a row, operations)
FED = {
    "ticket_message": ("r.ticket_id::text", ("INSERT", "UPDATE")),
    "ticket_history": ("r.ticket_id::text", ("INSERT",)),
    "ticket": ("r.id::text", ("UPDATE", "DELETE")),
}

OPENING = """
INSERT INTO ticket_message (ticket_id, team_id, author_id, internal, body, created_at)
SELECT t.id, t.team_id, t.creator_id, false, t.body, t.created_at FROM ticket t
WHERE NOT EXISTS (SELECT 1 FROM ticket_message m WHERE m.ticket_id = t.id)
ORDER BY t.id
"""


def _tables() -> None:
    op.create_table(
        "ticket_message",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("ticket_id", sa.Integer(), sa.ForeignKey("ticket.id", ondelete="CASCADE"), nullable=False),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), nullable=False),
        sa.Column("author_id", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="SET NULL"), nullable=True),
        sa.Column("internal", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("body", sa.String(), nullable=False, server_default=""),
        sa.Column("attachment_count", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("redacted_at", TZ, nullable=True),
        sa.Column("redacted_by", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="SET NULL"), nullable=True),
    )  # fmt: skip
    op.create_index("ticket_message_ticket", "ticket_message", ["ticket_id", "id"])
    op.create_table(
        "message_attachment",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("message_id", sa.Integer(), sa.ForeignKey("ticket_message.id", ondelete="CASCADE"), nullable=True),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), nullable=False),
        sa.Column("uploader_id", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="CASCADE"), nullable=False),
        sa.Column("filename", sa.String(255), nullable=False),
        sa.Column("content_type", sa.String(100), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )  # fmt: skip
    op.create_index("message_attachment_message", "message_attachment", ["message_id", "id"])
    op.create_index(
        "message_attachment_staged", "message_attachment", ["uploader_id", "created_at"],
        postgresql_where=sa.text("message_id IS NULL"),
    )  # fmt: skip
    op.create_table(
        "attachment_chunk",
        sa.Column("attachment_id", sa.Integer(), sa.ForeignKey("message_attachment.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )  # fmt: skip
    op.create_table(
        "message_email",
        sa.Column("message_id", sa.Integer(), sa.ForeignKey("ticket_message.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("task_id", sa.Integer(), sa.ForeignKey("background_task.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("recipient_id", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="SET NULL"), nullable=True),
    )  # fmt: skip
    op.create_index("ix_message_email_task_id", "message_email", ["task_id"])
    op.create_table(
        "ticket_history",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("ticket_id", sa.Integer(), sa.ForeignKey("ticket.id", ondelete="CASCADE"), nullable=False),
        sa.Column("team_id", sa.Integer(), sa.ForeignKey("team.id", ondelete="CASCADE"), nullable=False),
        sa.Column("actor_id", sa.Integer(), sa.ForeignKey("app_user.id", ondelete="SET NULL"), nullable=True),
        sa.Column("at", TZ, nullable=False),
        sa.Column("field", sa.String(20), nullable=False),
        sa.Column("old_value", sa.String(500), nullable=True),
        sa.Column("new_value", sa.String(500), nullable=True),
        sa.CheckConstraint("field IN ('status', 'priority', 'assignee', 'title')", name="field_valid"),
    )  # fmt: skip
    op.create_index("ticket_history_ticket", "ticket_history", ["ticket_id", "id"])


def upgrade() -> None:
    _tables()
    op.add_column("ticket", sa.Column("message_count", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("ticket", sa.Column("first_response_at", TZ, nullable=True))
    op.add_column("ticket", sa.Column("last_public_reply_at", TZ, nullable=True))
    op.add_column(
        "notification_preference",
        sa.Column("ticket_reply_email", sa.Boolean(), nullable=False, server_default=sa.true()),
    )  # fmt: skip
    op.execute(OPENING)
    op.execute("UPDATE ticket SET message_count = 1 WHERE message_count = 0")
    op.execute(
        "CREATE INDEX ticket_message_body_trgm ON ticket_message USING gin (body gin_trgm_ops)"
    )
    op.execute(
        "CREATE INDEX ticket_message_body_bigrams ON ticket_message "
        "USING gin (taskdesk_bigrams(body))"
    )
    op.execute(FEED_FUNCTION.replace("{item}", "r.ticket_id::text"))
    op.execute(
        FEED_FUNCTION.replace("taskdesk_feed_threads", "taskdesk_feed_tickets").replace(
            "{item}", "r.id::text"
        )
    )
    for table, (item, ops) in FED.items():
        fn = "taskdesk_feed_tickets" if item == "r.id::text" else "taskdesk_feed_threads"
        for o in ops:
            ref = {"INSERT": "NEW TABLE AS new_rows", "DELETE": "OLD TABLE AS old_rows"}.get(
                o, "OLD TABLE AS old_rows NEW TABLE AS new_rows"
            )
            op.execute(
                f"CREATE TRIGGER {table}_thread_feed_{o.lower()} AFTER {o} ON {table} "
                f"REFERENCING {ref} FOR EACH STATEMENT EXECUTE FUNCTION {fn}()"
            )


def downgrade() -> None:
    for table, (_item, ops) in FED.items():
        for o in ops:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_thread_feed_{o.lower()} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS taskdesk_feed_threads()")
    op.execute("DROP FUNCTION IF EXISTS taskdesk_feed_tickets()")
    op.drop_column("notification_preference", "ticket_reply_email")
    for col in ("last_public_reply_at", "first_response_at", "message_count"):
        op.drop_column("ticket", col)
    for table in ("ticket_history", "message_email", "attachment_chunk", "message_attachment", "ticket_message"):
        op.drop_table(table)
