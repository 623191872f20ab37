"""A ticket's SLA timers on the ledger (docs/architecture.md, "Business hours").

`replan(db, ticket_id, now)` runs in the transaction of every change a clock must see (a ticket
created, a public reply, a status or priority change; each bumps `ticket.revision`), holding
the ticket's row lock: it reads the ticket's facts and its team's policy in one statement
(`READ`), asks `desk.helpdesk.sla.clocks` where each target stands, writes `ticket.sla_due_at`
(the soonest running due instant) and `ticket.sla_breached_at` (the first breach, kept), ends
every waiting timer of the ticket the new plan does not want (same scope and same instant) as
skipped — "superseded (the ticket changed)", or "(the team's SLA policy changed)" for a policy
replan — and queues one SLA_TIMER task per running target for its warning (`run_at` = the
warning instant) and its breach (`run_at` = the due instant), each in the scope
`sla:{ticket}:{target}:{kind}:{revision}` (a duplicate collapses into the active one). Two
statements after the read; in a post's pipeline they are only sent and go with the commit.

A team without a policy costs the read alone, which returns before its subqueries run; the post
path folds even that into its own read (`desk.helpdesk.posting.READ`'s `sla`), so a post in a
team without SLA sends nothing more.

The task's `filters` say what it is for (target, kind, revision, its instant, the due instant it
watches); `desk/work/sla_firing.py` decides at fire time. `ticket_clocks(row, now)` over a
`READ` row is what the faces show ("due in / breached").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from desk.core.messages import Message, message
from desk.core.models import CLOSED_TICKET, TicketStatus
from desk.core.pg import send
from desk.helpdesk import sla_store, tickets
from desk.helpdesk.business_hours import Calendar
from desk.helpdesk.sla import Clock, Facts, Policy, Span, clocks
from desk.ledger.sql import Db, one

MAX_ATTEMPTS = 5
WARNING, BREACH = "warning", "breach"
_STAFF = "s.role IN ('ADMIN', 'STAFF')"
# The customer's oldest public message after staff's latest public one (None: answered).
_WAITING = (
    "(SELECT min(c.created_at) FROM ticket_message c WHERE c.ticket_id = t.id AND NOT c.internal"
    " AND NOT EXISTS (SELECT 1 FROM membership s WHERE s.user_id = c.author_id"
    f"  AND s.team_id = t.team_id AND {_STAFF})"
    " AND c.id > coalesce((SELECT max(x.id) FROM ticket_message x JOIN membership s"
    f"  ON s.user_id = x.author_id AND s.team_id = t.team_id AND {_STAFF}"
    "  WHERE x.ticket_id = t.id AND NOT x.internal), 0))"
)
# A ticket's facts and its team's policy; the subqueries run only when there is a policy.
FACTS = (
    "t.id, t.team_id, t.creator_id, t.assignee_id, t.title, t.priority, t.status, t.revision,"
    " t.created_at, t.first_response_at, t.status_since, t.sla_due_at, t.sla_breached_at,"
    " p.calendar, p.targets, p.warn_share, p.updated_at AS policy_at,"
    " CASE WHEN p.team_id IS NOT NULL THEN ARRAY(SELECT h.at FROM ticket_history h"
    "  WHERE h.ticket_id = t.id AND h.field = 'status' ORDER BY h.id) END AS s_at,"
    " CASE WHEN p.team_id IS NOT NULL THEN ARRAY(SELECT h.new_value FROM ticket_history h"
    "  WHERE h.ticket_id = t.id AND h.field = 'status' ORDER BY h.id) END AS s_to,"
    f" CASE WHEN p.team_id IS NOT NULL THEN {_WAITING} END AS waiting_since,"
    " CASE WHEN p.team_id IS NOT NULL THEN ARRAY(SELECT a.target || ' ' || a.kind"
    "  FROM ticket_clock_alert a WHERE a.ticket_id = t.id ORDER BY a.id) END AS fired,"
    " CASE WHEN p.team_id IS NOT NULL THEN ARRAY(SELECT a.due_at"
    "  FROM ticket_clock_alert a WHERE a.ticket_id = t.id ORDER BY a.id) END AS fired_due"
)
READ = (
    f"SELECT {FACTS} FROM ticket t LEFT JOIN team_sla_policy p ON p.team_id = t.team_id "
    "WHERE t.id = %(t)s"
)
# The ticket's columns, and its waiting timers the plan does not want (same scope and instant)
# ended as skipped; found by the partial index `background_task_sla_waiting` (migration 0021).
WRITE = """
WITH tk AS (
  UPDATE ticket SET sla_due_at = %(due)s::timestamptz,
   sla_breached_at = coalesce(sla_breached_at, %(breached)s::timestamptz)
  WHERE id = %(t)s RETURNING id
)
UPDATE background_task b SET status = 'COMPLETED', result_skipped = true,
 result_summary = %(why)s, summary_key = %(why_key)s, summary_params = '{}'::jsonb,
 progress = 1, finished_at = %(now)s, updated_at = %(now)s
WHERE b.kind = 'SLA_TIMER' AND b.status = 'WAITING' AND b.ticket_id = %(t)s
 AND NOT EXISTS (SELECT 1 FROM unnest(%(keys)s::text[], %(runs)s::timestamptz[]) AS x(k, r)
  WHERE x.k = b.scope_key AND x.r = b.run_at)
"""
# The plan's timers; a scope already active (the same timer, planned before) keeps its row.
QUEUE = """
INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters, run_at,
 max_attempts, sends, created_at, updated_at)
SELECT 'SLA_TIMER', %(team)s, %(owner)s, %(t)s, x.k, x.f::jsonb, x.r, %(max)s, 0, %(now)s, %(now)s
FROM unnest(%(keys)s::text[], %(filters)s::text[], %(runs)s::timestamptz[]) AS x(k, f, r)
ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING
"""


def scope_key(ticket_id: int, target: str, kind: str, revision: int) -> str:
    return f"sla:{ticket_id}:{target}:{kind}:{revision}"


@dataclass(frozen=True)
class Timer:
    target: str
    kind: str  # WARNING | BREACH
    at: datetime  # the instant it fires (the task's run_at)
    due_at: datetime  # the due instant of the target it watches


@dataclass(frozen=True)
class Plan:
    due_at: datetime | None  # the soonest running due instant
    breached_at: datetime | None  # the first breach seen
    timers: list[Timer] = field(default_factory=list)


def policy_of(row: Any) -> tuple[Policy, Calendar] | None:
    if row["calendar"] is None:
        return None
    return sla_store.parse(row["calendar"], row["targets"], row["warn_share"])


def facts_of(row: Any) -> tuple[Facts, bool]:
    """The clocks' facts of a READ row, and whether the ticket is resolved or closed."""
    at: Sequence[datetime] = row["s_at"] or ()
    to: Sequence[str] = row["s_to"] or ()
    pending: list[Span] = []
    start: datetime | None = None
    closed_since: datetime | None = None
    for when, status in zip(at, to, strict=True):
        if status == TicketStatus.PENDING and start is None:
            start = when
        elif status != TicketStatus.PENDING and start is not None:
            pending.append((start, when))
            start = None
        closed = status in CLOSED_TICKET
        closed_since = (closed_since or when) if closed else None
    status = row["status"]
    since = row["status_since"] or row["created_at"]
    if status == TicketStatus.PENDING and start is None:
        start = since  # pending with no history of it (set before its history began)
    if start is not None:
        pending.append((start, None))
    resolved = status in CLOSED_TICKET
    resolved_at = (closed_since or since) if resolved else None
    facts = Facts(
        priority=row["priority"], created_at=row["created_at"],
        first_response_at=row["first_response_at"], waiting_since=row["waiting_since"],
        resolved_at=resolved_at, pending=tuple(pending),
    )  # fmt: skip
    return facts, resolved


def ticket_clocks(row: Any, now: datetime) -> tuple[list[Clock], bool] | None:
    """The ticket's clocks at `now` over a READ row (None: its team has no policy), and whether
    it is resolved or closed."""
    found = policy_of(row)
    if found is None:
        return None
    facts, resolved = facts_of(row)
    return clocks(found[0], found[1], facts, now), resolved


def fired_of(row: Any) -> set[tuple[str, str, datetime]]:
    """The alerts already fired for the ticket: (target, kind, due instant), any revision."""
    what: Sequence[str] = row["fired"] or ()
    due: Sequence[datetime] = row["fired_due"] or ()
    out: set[tuple[str, str, datetime]] = set()
    for w, d in zip(what, due, strict=True):
        target, _, kind = w.partition(" ")
        out.add((target, kind, d))
    return out


def plan(row: Any, now: datetime) -> Plan:
    """What the ticket's clocks ask of the ledger at `now`: its due and breach instants and the
    timers to queue — none for a resolved ticket, none for an alert already fired for the same
    target, kind and due instant (in whatever revision: a customer's second message moves the
    revision, not the first response's due time), none for a breach due before the policy."""
    found = ticket_clocks(row, now)
    if found is None:
        return Plan(None, None)
    cs, resolved = found
    breaches = [c.due_at for c in cs if c.state == "breached" and c.due_at is not None]
    if resolved:
        return Plan(None, min(breaches, default=None))
    fired = fired_of(row)
    timers: list[Timer] = []
    for c in cs:
        if c.due_at is None or c.state not in ("running", "breached"):
            continue
        wanted = [(BREACH, c.due_at)]
        if c.state == "running" and c.warn_at is not None:
            wanted.insert(0, (WARNING, max(c.warn_at, now)))
        for kind, at in wanted:
            if (c.target, kind, c.due_at) in fired or _before_policy(row, kind, c.due_at):
                continue
            timers.append(Timer(c.target, kind, at, c.due_at))
    running = [c.due_at for c in cs if c.state == "running" and c.due_at is not None]
    return Plan(min(running, default=None), min(breaches, default=None), timers)


def _before_policy(row: Any, kind: str, due_at: datetime) -> bool:
    """A breach due before the team's policy took its present form: recorded on the ticket
    (`sla_breached_at`), never announced — saving a policy over months-old tickets must not send
    the team a breach notice for each of them at once."""
    since = row["policy_at"]
    return kind == BREACH and since is not None and due_at < since


async def replan(
    db: Db, ticket_id: int, now: datetime, *, why: str = "sla_timer.skipped.superseded"
) -> Plan | None:
    """Plan the ticket's SLA timers again, in the caller's transaction (which holds the ticket's
    row lock or has just written it). None: the team has no policy and the ticket no timers
    (nothing written)."""
    row = await read(db, ticket_id)
    if row is None or (row["calendar"] is None and row["sla_due_at"] is None):
        return None
    planned = plan(row, now)  # no policy now but a due time left: cleared, timers ended
    await write_plan(db, row, planned, now, message(why))
    return planned


async def read(db: Db, ticket_id: int) -> dict[str, Any] | None:
    """The ticket's READ row (None: no such ticket)."""
    if isinstance(db, psycopg.AsyncConnection):  # a post's pipeline: waits for what was sent
        cursor = db.cursor(row_factory=dict_row)
        await cursor.execute(READ, {"t": ticket_id})
        return await cursor.fetchone()
    return await one(db, READ, {"t": ticket_id})


async def write_plan(db: Db, row: Any, planned: Plan, now: datetime, why: Message) -> None:
    """The plan's ticket columns, the unwanted timers ended and the wanted ones queued."""
    tid, rev = row["id"], row["revision"]
    keys = [scope_key(tid, t.target, t.kind, rev) for t in planned.timers]
    filters = [
        json.dumps({"target": t.target, "kind": t.kind, "revision": rev,
                    "at": t.at.isoformat(), "due_at": t.due_at.isoformat()})
        for t in planned.timers
    ]  # fmt: skip
    params = {
        "t": tid, "team": row["team_id"], "owner": row["creator_id"], "due": planned.due_at,
        "breached": planned.breached_at, "why": why.text, "why_key": why.key, "now": now,
        "keys": keys, "filters": filters, "runs": [t.at for t in planned.timers],
        "max": MAX_ATTEMPTS,
    }  # fmt: skip
    statements = [WRITE, QUEUE] if keys else [WRITE]
    for sql in statements:
        if isinstance(db, psycopg.AsyncConnection):
            await send(db, sql, params)  # pipelined: sent now, answered with the commit
        else:
            await one(db, sql, params)


async def _after_change(db: Any, ticket_id: int, now: datetime) -> tuple[Any, Any] | None:
    planned = await replan(db, ticket_id, now)
    return None if planned is None else (planned.due_at, planned.breached_at)


tickets.REPLAN.append(_after_change)  # ticket created, status or priority changed
