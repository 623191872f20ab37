"""A team's time rules on the ledger (docs/architecture.md, "Business hours", "Time rules on the
ledger"): the rules as people read and save them, and the TIME_RULE runs that apply them.

A run is one ledger task per team (scope `time-rules:<team>`, so one active at a time). It goes
once through the team's tickets whose next act is due (`rule_sql.DUE`, in batches) and acts on
each in its own short transaction with the ticket locked: `time_rules.still_applies` on what it
reads now, then the act's claim (a `ticket_rule_action` row, unique per ticket, rule and
revision), then the act itself — a status change through `tickets.apply_changes` (history and
revision follow) with an audit entry, or for a reminder a public message through the
conversation's own post, so the customer is mailed as for any reply. The claim commits with the
act, so duplicates, retries and rescues act once. The run then queues the next one at the
team's next due instant (`schedule_next`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.db import retrying
from desk.core.errors import NotAllowed, NotFound
from desk.core.models import BackgroundTask, Ticket, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import tickets, time_rules
from desk.helpdesk.time_rules import Rules
from desk.ledger.accept import as_task
from desk.ledger.delivery import send_reserved
from desk.ledger.sql import Db, one, rows
from desk.people import access, audit
from desk.work import conversation, rule_sql
from desk.work.tasks import kick

ACTOR = "time rules"  # what the audit trail names the rules by (no person acted)
REMIND_TEXT = (
    "We are still waiting for your answer on this ticket. Reply to this message to continue; "
    "without an answer it will be marked resolved."
)
BATCH = 100  # tickets a run reads per batch


@dataclass(frozen=True)
class Saved:
    rules: Rules
    updated_by_id: int | None
    updated_at: datetime | None


@dataclass(frozen=True)
class Touched:
    ticket_id: int
    title: str
    rule: str
    acted_at: datetime


@dataclass(frozen=True)
class Run:
    task_id: int
    status: str
    run_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    summary: str
    error: str | None
    touched: list[Touched]


def _rules(row: dict[str, Any] | None) -> Rules:
    if row is None:
        return Rules()
    return Rules(row["close_resolved_after"], row["remind_pending_after"],
                 row["resolve_pending_after"])  # fmt: skip


async def _reader(conn: AsyncConnection, user_id: int, team_id: int) -> access.Member:
    """Staff and admins read a team's rules; a customer or a stranger is told the team does not
    exist, exactly as for a missing one."""
    member = await access.membership(conn, user_id, team_id)
    if member is None or not member.is_staff:
        raise NotFound("Team not found.")
    return member


async def read_rules(rt: Runtime, user_id: int, team_id: int) -> Saved:
    async with rt.engine.connect() as conn:
        await _reader(conn, user_id, team_id)
        row = await one(conn, rule_sql.RULES, {"team": team_id})
    if row is None:
        return Saved(Rules(), None, None)
    return Saved(_rules(row), row["updated_by_id"], row["updated_at"])


async def save_rules(rt: Runtime, user_id: int, team_id: int, rules: Rules) -> Saved:
    """Admins only; the rules apply at once: a run is queued now (or the waiting one brought
    forward), in the transaction that saves them."""
    now = rt.clock()

    async def once() -> tuple[Saved, BackgroundTask | None]:
        async with rt.engine.begin() as conn:
            member = await _reader(conn, user_id, team_id)
            if not member.is_admin:
                raise NotAllowed("Only team admins can change the time rules.")
            params = {"team": team_id, "close": rules.close_resolved_after,
                      "remind": rules.remind_pending_after,
                      "resolve": rules.resolve_pending_after, "by": user_id, "now": now}  # fmt: skip
            row = await one(conn, rule_sql.SAVE, params)
            assert row is not None
            task = await queue_run(conn, team_id, run_at=now, now=now)
            if task is None:
                found = await one(conn, rule_sql.EARLIER, {"team": team_id, "now": now})
                task = as_task(found) if found else None
            return Saved(_rules(row), user_id, row["updated_at"]), task

    saved, task = await retrying(once)
    if task is not None:
        await kick(rt, task)
    return saved


async def queue_run(
    db: Db, team_id: int, *, run_at: datetime, now: datetime
) -> BackgroundTask | None:
    """The team's run at `run_at`; None when one is active, no rule is on or no admin is left."""
    found = await one(db, rule_sql.QUEUE, {"team": team_id, "run_at": run_at, "now": now})
    return as_task(found) if found else None


async def ensure_runs(db: Db, *, now: datetime) -> list[int]:
    """The scheduler's pass: every team with a rule on and no active run gets one now."""
    return [int(r["id"]) for r in await rows(db, rule_sql.ENSURE, {"now": now})]


async def schedule_next(db: Db, team_id: int, *, now: datetime) -> BackgroundTask | None:
    """The next run, at the team's next due instant — or sooner: a ticket that enters its status
    after `now` is due no earlier than the shortest rule's days from now, so waking by then
    misses nothing. None when no rule is on."""
    rules = _rules(await one(db, rule_sql.RULES, {"team": team_id}))
    days = [d for d in (rules.close_resolved_after, rules.remind_pending_after,
                        rules.resolve_pending_after) if d is not None]  # fmt: skip
    if not days:
        return None
    due = await one(db, rule_sql.NEXT_DUE, {"team": team_id, "now": now, "after": 0})
    run_at = now + timedelta(days=min(days))
    if due is not None and due["due"] is not None:
        run_at = min(run_at, due["due"])
    return await queue_run(db, team_id, run_at=run_at, now=now)


@dataclass
class Pass:
    acted: list[tuple[int, str]]  # (ticket id, rule) this pass acted on
    seen: int  # tickets it read as due
    last_id: int  # the last ticket id it read: the next pass starts after it


async def run_once(
    rt: Runtime, team_id: int, task_id: int, *, after: int = 0, limit: int = BATCH
) -> Pass:
    """One batch of the team's due tickets (after ticket id `after`), each acted on in its own
    transaction."""
    now = rt.clock()
    due = await rows(rt.pg, rule_sql.DUE,
                     {"team": team_id, "now": now, "after": after, "limit": limit})  # fmt: skip
    done = Pass([], len(due), due[-1]["id"] if due else after)
    for plan in due:
        action = time_rules.Action(plan["rule"], plan["due"],
                                   f"ticket-rule:{plan['rule']}:{plan['id']}:{plan['revision']}")  # fmt: skip
        if await act(rt, team_id, task_id, plan["id"], action):
            done.acted.append((plan["id"], plan["rule"]))
    return done


async def act(rt: Runtime, team_id: int, task_id: int, ticket_id: int, planned: Any) -> bool:
    """Do `planned` to the ticket if it still applies; False when it no longer does (the ticket
    changed, the rules changed) or another run's claim got there first."""

    async def once() -> conversation._Sent | bool:
        async with rt.engine.begin() as conn:
            return await _act(conn, rt, team_id, task_id, ticket_id, planned)

    done = await retrying(once)
    if isinstance(done, bool):
        return done
    posted = await done.posted()  # a reminder's message: its e-mails go out after the commit
    for due in posted.sends:
        await send_reserved(rt, due)
    return True


async def _act(
    conn: AsyncConnection, rt: Runtime, team_id: int, task_id: int, ticket_id: int, planned: Any
) -> conversation._Sent | bool:
    now = rt.clock()
    row = await one(conn, rule_sql.LOCK, {"ticket": ticket_id})
    rules = _rules(await one(conn, rule_sql.RULES, {"team": team_id}))
    if row is None or row["team_id"] != team_id:
        return False
    fresh = time_rules.Ticket(row["id"], row["status"], row["status_since"], row["revision"],
                              row["reminded_at"])  # fmt: skip
    if not time_rules.still_applies(rules, fresh, planned) or planned.at > now:
        return False
    # A reminder's row carries the revision its own message leaves (a public message bumps it
    # by one), so "reminded" reads as a 'remind' row at the ticket's current revision.
    revision = fresh.revision + (1 if planned.kind == "remind" else 0)
    claim = {"team": team_id, "ticket": ticket_id, "rule": planned.kind, "revision": revision,
             "task": task_id, "now": now}  # fmt: skip
    if await one(conn, rule_sql.CLAIM, claim) is None:
        return False
    if planned.kind == "remind":
        return await _remind(conn, rt, team_id, ticket_id, task_id)
    status = TicketStatus.CLOSED if planned.kind == "close" else TicketStatus.RESOLVED
    ticket = await _ticket(conn, ticket_id)
    await tickets.apply_changes(conn, ticket, {"status": status.value}, actor_id=None, now=now)
    await _audit(conn, now, team_id, task_id, f"{planned.kind}: ticket {ticket_id} → {status}")
    return True


async def _ticket(conn: AsyncConnection, ticket_id: int) -> Ticket:
    row = await one(conn, f"SELECT {tickets.TICKET_COLUMNS} FROM ticket t WHERE t.id = %(t)s",
                    {"t": ticket_id})  # fmt: skip
    assert row is not None
    return Ticket(**row)


async def _remind(
    conn: AsyncConnection, rt: Runtime, team_id: int, ticket_id: int, task_id: int
) -> conversation._Sent:
    """The reminder: a public message from the run's owner (an admin of the team), posted and
    mailed as any staff reply is, in this transaction."""
    owner = await one(conn, "SELECT owner_id FROM background_task WHERE id = %(id)s",
                      {"id": task_id})  # fmt: skip
    author = await _author(conn, team_id, owner["owner_id"] if owner else None)
    raw = await conn.get_raw_connection()
    driver: Any = raw.driver_connection  # psycopg's connection, in this transaction
    sent = await conversation._post(driver, rt, author, ticket_id, REMIND_TEXT, False, [], [], None)
    await _audit(conn, rt.clock(), team_id, task_id, f"remind: ticket {ticket_id}")
    return sent


async def _author(conn: AsyncConnection, team_id: int, owner_id: int | None) -> int:
    row = await one(
        conn,
        "SELECT user_id FROM membership WHERE team_id = %(team)s AND role = 'ADMIN' "
        "ORDER BY user_id = %(owner)s DESC, user_id LIMIT 1",
        {"team": team_id, "owner": owner_id or 0},
    )
    if row is None:
        raise NotFound("The team has no admin left to remind its customers.")
    return int(row["user_id"])


async def _audit(
    conn: AsyncConnection, now: datetime, team_id: int, task_id: int, what: str
) -> None:
    await audit.record(conn, at=now, actor_id=None, actor=ACTOR, action="time_rule",
                       team_id=team_id, task_ids=[task_id], detail=what)  # fmt: skip


async def list_runs(rt: Runtime, user_id: int, team_id: int, *, limit: int = 20) -> list[Run]:
    """The team's latest runs, newest first, each with the tickets it touched (staff, admins)."""
    async with rt.engine.connect() as conn:
        await _reader(conn, user_id, team_id)
        found = await rows(conn, rule_sql.RUNS, {"team": team_id, "limit": limit})
        ids = [r["id"] for r in found]
        touched = await rows(conn, rule_sql.TOUCHED, {"tasks": ids}) if ids else []
    by_task: dict[int, list[Touched]] = {}
    for t in touched:
        by_task.setdefault(t["task_id"], []).append(
            Touched(t["ticket_id"], t["title"], t["rule"], t["acted_at"])
        )
    return [
        Run(r["id"], r["status"], r["run_at"], r["started_at"], r["finished_at"],
            r["result_summary"] or "", r["last_error"], by_task.get(r["id"], []))
        for r in found
    ]  # fmt: skip
