"""A team's time rules: what happens to a ticket nobody touches (docs/architecture.md,
"Business hours"): "resolved for N days → closed", and "pending for N days → remind the
customer, then after M more days → resolved".

`next_action(rules, ticket)` answers the one question the worker that applies them asks: what is
the next thing a rule does to this ticket, and when. Each answer carries a `key` naming the rule,
the ticket and its revision — the scope of the ledger task that will do it — so a ticket is
acted on at most once per rule and revision, and any change to the ticket (a reply, a status
change) bumps the revision and leaves an earlier task with nothing to do. Calendar days, in
real time: these rules say "after a week", not "after five working days".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from desk.core.errors import ValidationProblem

Kind = Literal["close", "remind", "resolve"]
MAX_DAYS = 3650


@dataclass(frozen=True)
class Rules:
    close_resolved_after: int | None = None  # days RESOLVED before CLOSED
    remind_pending_after: int | None = None  # days PENDING before the customer is reminded
    resolve_pending_after: int | None = None  # days after that reminder before RESOLVED

    def __post_init__(self) -> None:
        for name in ("close_resolved_after", "remind_pending_after", "resolve_pending_after"):
            days = getattr(self, name)
            if days is not None and not 1 <= days <= MAX_DAYS:
                raise ValidationProblem(name, f"give a number of days from 1 to {MAX_DAYS}")
        if self.resolve_pending_after is not None and self.remind_pending_after is None:
            raise ValidationProblem(
                "resolve_pending_after", "remind the customer first: set remind_pending_after"
            )


@dataclass(frozen=True)
class Ticket:
    id: int
    status: str
    status_since: datetime  # when it entered its status
    revision: int  # bumped by every change a rule must see
    reminded_at: datetime | None = None  # the pending reminder of this revision, once sent


@dataclass(frozen=True)
class Action:
    kind: Kind
    at: datetime
    key: str  # the ledger task's scope: one per rule, ticket and revision


def next_action(rules: Rules, t: Ticket) -> Action | None:
    """The next thing a rule does to `t`, and when; None when no rule applies."""
    if t.status == "RESOLVED" and rules.close_resolved_after is not None:
        return _action("close", t, t.status_since + timedelta(days=rules.close_resolved_after))
    if t.status != "PENDING" or rules.remind_pending_after is None:
        return None
    if t.reminded_at is None:
        return _action("remind", t, t.status_since + timedelta(days=rules.remind_pending_after))
    if rules.resolve_pending_after is not None:
        return _action("resolve", t, t.reminded_at + timedelta(days=rules.resolve_pending_after))
    return None


def still_applies(rules: Rules, t: Ticket, action: Action) -> bool:
    """Whether `action`, planned earlier, is still what the rules would do now — checked by
    the task that does it, with the ticket read (and locked) in its own transaction: a ticket
    changed since is another revision, so the earlier plan is superseded and does nothing."""
    now = next_action(rules, t)
    return now is not None and now.key == action.key and now.at <= action.at


def _action(kind: Kind, t: Ticket, at: datetime) -> Action:
    return Action(kind, at, f"ticket-rule:{kind}:{t.id}:{t.revision}")
