"""SQLModel tables of a ticket's conversation: its messages (public replies and internal notes),
their attachments (stored in PostgreSQL in chunks, as exports are), the e-mails each message
sent, and the ticket's history of changes (docs/architecture.md, "Conversation")."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

TZ = sa.DateTime(timezone=True)


class HistoryField(StrEnum):
    STATUS = "status"
    PRIORITY = "priority"
    ASSIGNEE = "assignee"
    TITLE = "title"


class TicketMessage(SQLModel, table=True):
    """One message of a ticket's thread, in order of `id`. `internal`: a note, staff only. Never
    edited; an admin's redaction empties `body`, drops its attachments and keeps who and when."""

    __tablename__ = "ticket_message"
    __table_args__ = (
        sa.Index("ticket_message_ticket", "ticket_id", "id"),
        sa.Index(
            "ticket_message_body_trgm",
            "body",
            postgresql_using="gin",
            postgresql_ops={"body": "gin_trgm_ops"},
        ),
        sa.Index(
            "ticket_message_body_bigrams", sa.text("taskdesk_bigrams(body)"), postgresql_using="gin"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    ticket_id: int = Field(foreign_key="ticket.id", ondelete="CASCADE")
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    author_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    internal: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    body: str = Field(default="", sa_column_kwargs={"server_default": ""})
    attachment_count: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    created_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    redacted_at: datetime | None = Field(default=None, sa_column=sa.Column(TZ, nullable=True))
    redacted_by: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")


class MessageAttachment(SQLModel, table=True):
    """A file of a message, or a staged upload (`message_id` NULL) its uploader may attach to
    the next message they post; its bytes are `attachment_chunk` rows."""

    __tablename__ = "message_attachment"
    __table_args__ = (
        sa.Index("message_attachment_message", "message_id", "id"),
        sa.Index(
            "message_attachment_staged",
            "uploader_id",
            "created_at",
            postgresql_where=sa.text("message_id IS NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    message_id: int | None = Field(
        default=None, foreign_key="ticket_message.id", ondelete="CASCADE"
    )
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    uploader_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE")
    filename: str = Field(max_length=255)
    content_type: str = Field(max_length=100)
    size: int = Field(sa_type=sa.BigInteger)
    created_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))


class AttachmentChunk(SQLModel, table=True):
    """One piece of an attachment's bytes (desk/helpdesk/attachments.py: CHUNK bytes each), so a
    file goes in and out a piece at a time, never whole in a process's memory."""

    __tablename__ = "attachment_chunk"

    attachment_id: int = Field(
        foreign_key="message_attachment.id", primary_key=True, ondelete="CASCADE"
    )
    seq: int = Field(primary_key=True)
    data: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))


class MessageEmail(SQLModel, table=True):
    """An EMAIL task a public message queued, in the message's transaction: its delivery state
    is the task's (sending, delivered, retrying, failed)."""

    __tablename__ = "message_email"

    message_id: int = Field(foreign_key="ticket_message.id", primary_key=True, ondelete="CASCADE")
    task_id: int = Field(
        foreign_key="background_task.id", primary_key=True, ondelete="CASCADE", index=True
    )
    recipient_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")


class TicketHistory(SQLModel, table=True):
    """One change of a ticket's status, priority, assignee or title: who, when, from, to."""

    __tablename__ = "ticket_history"
    __table_args__ = (
        sa.Index("ticket_history_ticket", "ticket_id", "id"),
        sa.CheckConstraint(
            "field IN ('status', 'priority', 'assignee', 'title')", name="field_valid"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    ticket_id: int = Field(foreign_key="ticket.id", ondelete="CASCADE")
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    actor_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    field: str = Field(max_length=20)
    old_value: str | None = Field(default=None, max_length=500)
    new_value: str | None = Field(default=None, max_length=500)
