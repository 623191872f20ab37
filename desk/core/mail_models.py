"""SQLModel tables of mail in (docs/architecture.md, "Mail in"): a team's mailboxes and every
message fetched from them, kept raw before it is read."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

TZ = sa.DateTime(timezone=True)


class InboundOutcome(StrEnum):
    TICKET = "ticket"  # opened a ticket
    REPLY = "reply"  # a message in an existing ticket
    AUTOMATIC = "automatic"  # an auto-reply, bounce or bulk mail: ignored
    UNREADABLE = "unreadable"  # kept raw, could not be parsed
    HELD = "held"  # held for review
    THROTTLED = "throttled"  # over its sender's flood limit: kept raw, nothing made
    DUPLICATE = "duplicate"  # a Message-ID already read in this mailbox (a renumbered server)
    DISCARDED = "discarded"  # held, then discarded by an admin (desk/work/mailbox_held.py)


class Mailbox(SQLModel, table=True):
    """One IMAP mailbox of a team. `password_enc` is Fernet ciphertext (MAILBOX_KEY), never
    read back by any face; `last_uid` is the watermark under `uidvalidity`."""

    __tablename__ = "mailbox"

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE", index=True)
    # Owner of the mailbox's ledger tasks (every task but an EMAIL names a team and an owner).
    created_by_id: int = Field(foreign_key="app_user.id", ondelete="CASCADE")
    host: str = Field(max_length=255)
    port: int = Field(default=993, sa_column_kwargs={"server_default": "993"})
    use_tls: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    username: str = Field(max_length=320)
    password_enc: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    folder: str = Field(
        default="INBOX", max_length=200, sa_column_kwargs={"server_default": "INBOX"}
    )
    cadence_seconds: int = Field(default=30, sa_column_kwargs={"server_default": "30"})
    uidvalidity: int | None = Field(default=None, sa_type=sa.BigInteger)
    last_uid: int = Field(
        default=0, sa_type=sa.BigInteger, sa_column_kwargs={"server_default": "0"}
    )
    last_fetch_at: datetime | None = Field(default=None, sa_column=sa.Column(TZ, nullable=True))
    last_error: str | None = Field(default=None)
    enabled: bool = Field(default=True, sa_column_kwargs={"server_default": sa.true()})
    # Staff only: mail from someone not in the team is held for review, not made a customer.
    staff_only: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    created_at: datetime = Field(
        sa_column=sa.Column(TZ, nullable=False, server_default=sa.func.now())
    )


class InboundMail(SQLModel, table=True):
    """One fetched message, its bytes as the server gave them; `parsed_at` is set once, in the
    transaction that made its ticket or reply (or marked it)."""

    __tablename__ = "inbound_mail"
    __table_args__ = (
        sa.UniqueConstraint("mailbox_id", "uidvalidity", "uid", name="inbound_mail_uid"),
        sa.Index(
            "inbound_mail_unparsed", "mailbox_id", postgresql_where=sa.text("parsed_at IS NULL")
        ),
        sa.Index("inbound_mail_sender", "mailbox_id", "sender", "received_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    mailbox_id: int = Field(foreign_key="mailbox.id", ondelete="CASCADE")
    uidvalidity: int = Field(sa_type=sa.BigInteger)
    uid: int = Field(sa_type=sa.BigInteger)
    message_id: str | None = Field(default=None, max_length=1000)
    sender: str | None = Field(default=None, max_length=320)  # lower-cased From, for throttling
    raw: bytes = Field(sa_column=sa.Column(sa.LargeBinary, nullable=False))
    received_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    parsed_at: datetime | None = Field(default=None, sa_column=sa.Column(TZ, nullable=True))
    outcome: str | None = Field(default=None, max_length=20)
    ticket_id: int | None = Field(default=None, foreign_key="ticket.id", ondelete="SET NULL")
    ticket_message_id: int | None = Field(
        default=None, foreign_key="ticket_message.id", ondelete="SET NULL"
    )
    problem: str | None = Field(default=None)
