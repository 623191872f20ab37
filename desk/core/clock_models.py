"""SQLModel tables of a team's clocks (docs/architecture.md, "Business hours"): its SLA policy
and time rules, each SLA warning or breach fired, and each time rule's action on a ticket.

The `*_once` unique constraints are what make each of them happen at most once per ticket
revision, whatever retries, rescues or duplicate tasks do: the insert is the act's claim."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg
from sqlmodel import Field, SQLModel

TZ = sa.DateTime(timezone=True)


class AlertKind(StrEnum):
    WARNING = "warning"  # the target's warn share is used up
    BREACH = "breach"  # the target is due and not met


class RuleKind(StrEnum):
    CLOSE = "close"  # resolved for N days → closed
    REMIND = "remind"  # pending for N days → the customer reminded
    RESOLVE = "resolve"  # M days after that reminder → resolved


def _now() -> Any:
    return Field(sa_column=sa.Column(TZ, nullable=False, server_default=sa.func.now()))


class SlaPolicy(SQLModel, table=True):
    """A team's SLA: its business-hours calendar and per-target, per-priority seconds
    (desk/helpdesk/sla.py `Policy`, desk/helpdesk/business_hours.py `Calendar`, as JSON)."""

    __tablename__ = "team_sla_policy"

    team_id: int = Field(foreign_key="team.id", primary_key=True, ondelete="CASCADE")
    calendar: dict[str, Any] = Field(sa_column=sa.Column(pg.JSONB, nullable=False))
    targets: dict[str, Any] = Field(sa_column=sa.Column(pg.JSONB, nullable=False))
    warn_share: float = Field(default=0.75, sa_column_kwargs={"server_default": "0.75"})
    updated_by_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    updated_at: datetime = _now()


class TimeRules(SQLModel, table=True):
    """A team's time rules in days (desk/helpdesk/time_rules.py `Rules`); NULL: rule off."""

    __tablename__ = "team_time_rules"

    team_id: int = Field(foreign_key="team.id", primary_key=True, ondelete="CASCADE")
    close_resolved_after: int | None = Field(default=None)
    remind_pending_after: int | None = Field(default=None)
    resolve_pending_after: int | None = Field(default=None)
    updated_by_id: int | None = Field(default=None, foreign_key="app_user.id", ondelete="SET NULL")
    updated_at: datetime = _now()


class ClockAlert(SQLModel, table=True):
    """One SLA warning or breach, fired once per ticket, target and ticket revision."""

    __tablename__ = "ticket_clock_alert"
    __table_args__ = (
        sa.UniqueConstraint(
            "ticket_id", "target", "kind", "revision", name="ticket_clock_alert_once"
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    ticket_id: int = Field(foreign_key="ticket.id", ondelete="CASCADE")
    target: str = Field(max_length=20)
    kind: str = Field(max_length=10)
    revision: int = Field(sa_type=sa.BigInteger)
    due_at: datetime = Field(sa_column=sa.Column(TZ, nullable=False))
    fired_at: datetime = _now()
    task_id: int | None = Field(default=None, sa_type=sa.BigInteger)


class RuleAction(SQLModel, table=True):
    """One time rule's act on a ticket, once per rule and ticket revision; `task_id` is the
    run that did it, so a run lists the tickets it touched."""

    __tablename__ = "ticket_rule_action"
    __table_args__ = (
        sa.UniqueConstraint("ticket_id", "rule", "revision", name="ticket_rule_action_once"),
        sa.Index("ticket_rule_action_team_acted", "team_id", sa.text("acted_at DESC")),
        sa.Index("ticket_rule_action_task", "task_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    team_id: int = Field(foreign_key="team.id", ondelete="CASCADE")
    ticket_id: int = Field(foreign_key="ticket.id", ondelete="CASCADE")
    rule: str = Field(max_length=10)
    revision: int = Field(sa_type=sa.BigInteger)
    task_id: int | None = Field(default=None, sa_type=sa.BigInteger)
    acted_at: datetime = _now()
