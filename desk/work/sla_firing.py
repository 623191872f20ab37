"""What an SLA timer does at fire time (docs/architecture.md, "Business hours").

In ONE transaction, holding the ticket's row lock (so a reply, a status change or a replan
cannot slip in before it commits): re-read the ticket's facts and its team's policy
(`sla_timers.READ`), decide, complete the task, and — only when it fires — insert the alert
into `ticket_clock_alert` (unique per ticket, target, kind and revision: at most once however
often the task is retried or rescued), set `ticket.sla_breached_at` for a breach, notify the
assignee (or, unassigned, the team's staff and admins) in-app and by e-mail per their
`sla_email` preference (desk/work/news.py). A timer is skipped, saying why, when:
- its ticket is gone; the ticket's revision moved on (superseded: the ticket changed);
- the team has no policy now, or the target's due instant is no longer the one it watched
  (superseded: the policy changed — the ticket is planned again at once, in this transaction);
- the ticket is resolved or closed; an alert of that target and kind was already sent for the
  same due instant (a customer's second message moves the revision, not the due time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.messages import Message, message
from desk.core.models import CLOSED_TICKET
from desk.core.runtime import Runtime
from desk.helpdesk import notifications
from desk.ledger import run as ledger_run
from desk.ledger.run import Row
from desk.ledger.sql import one, rows
from desk.work import news, sla_timers
from desk.work.sla_timers import BREACH

NOTIFICATION_KIND = {"warning": "SLA_WARNING", "breach": "SLA_BREACH"}
TARGET_NAMES = {
    "first_response": "first response",
    "next_response": "next response",
    "resolution": "resolution",
}
_LOCKED = sla_timers.READ + " FOR NO KEY UPDATE OF t"
_STAFF = "m.role IN ('ADMIN', 'STAFF')"
# The assignee while they are the team's staff, else every staff member and admin of the team.
_RECIPIENTS = (
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM membership m WHERE m.user_id = %(a)s "
    f" AND m.team_id = %(team)s AND {_STAFF}) THEN ARRAY[%(a)s::int] "
    " ELSE ARRAY(SELECT m.user_id FROM membership m WHERE m.team_id = %(team)s "
    f"  AND {_STAFF} ORDER BY m.user_id) END AS ids"
)
_ALERT = (
    "INSERT INTO ticket_clock_alert (ticket_id, target, kind, revision, due_at, fired_at, task_id) "
    "VALUES (%(t)s, %(target)s, %(kind)s, %(rev)s, %(due)s, %(now)s, %(task)s) "
    "ON CONFLICT ON CONSTRAINT ticket_clock_alert_once DO NOTHING RETURNING id"
)
_BREACHED = (
    "UPDATE ticket SET sla_breached_at = coalesce(sla_breached_at, %(due)s), "
    " sla_due_at = %(next)s::timestamptz WHERE id = %(t)s"
)


@dataclass(frozen=True)
class Decision:
    skipped: bool
    summary: Message
    replan: bool = False  # the policy moved the due instant: plan the ticket again


def decide(row: dict[str, Any] | None, filters: dict[str, Any], now: datetime) -> Decision:
    """Skip (and why) or fire, for the timer's `filters` over the ticket's locked READ row."""
    if row is None:
        return Decision(True, message("sla_timer.skipped.ticket_gone"))
    if row["revision"] != filters.get("revision"):
        return Decision(True, message("sla_timer.skipped.superseded"))
    found = sla_timers.ticket_clocks(row, now)
    if found is None:
        return Decision(True, message("sla_timer.skipped.policy"), replan=True)
    if row["status"] in CLOSED_TICKET:
        return Decision(True, message("sla_timer.skipped.closed", status=str(row["status"])))
    due = datetime.fromisoformat(filters["due_at"])
    target, kind = filters["target"], filters["kind"]
    clock = next((c for c in found[0] if c.target == target), None)
    if clock is None or clock.due_at != due:
        return Decision(True, message("sla_timer.skipped.policy"), replan=True)
    if (target, kind, due) in sla_timers.fired_of(row):
        return Decision(True, message("sla_timer.skipped.already"))
    return Decision(False, message("sla_timer.warned", count=0, target="", due_at=due))


async def fire(rt: Runtime, task: Row, execution_id: str) -> Row | None:
    """Decide and finish the timer, with its alert and notifications, in one transaction; the
    row it finished (None: the fence was lost, nothing written)."""
    now = rt.clock()
    filters: dict[str, Any] = dict(task.filters or {})
    async with rt.engine.begin() as conn:
        row = await one(conn, _LOCKED, {"t": task.ticket_id or 0})
        if not filters.get("due_at"):
            decision = Decision(True, message("sla_timer.skipped.superseded"))
        else:
            decision = decide(row, filters, now)
        if decision.skipped:
            done = await _complete(conn, task, execution_id, decision.summary, now, skipped=True)
            if done is not None and decision.replan and row is not None:
                await sla_timers.replan(conn, row["id"], now, why="sla_timer.skipped.policy")
            return done
        assert row is not None
        return await _fire(rt, conn, task, execution_id, row, filters, now)


async def _complete(
    conn: AsyncConnection,
    task: Row,
    execution_id: str,
    said: Message,
    now: datetime,
    *,
    skipped: bool,
) -> Row | None:
    return await ledger_run.complete(
        conn, task.id or 0, execution_id, now=now, summary=said.text, summary_key=said.key,
        summary_params=said.params, skipped=skipped,
    )  # fmt: skip


async def _fire(
    rt: Runtime,
    conn: AsyncConnection,
    task: Row,
    execution_id: str,
    row: dict[str, Any],
    filters: dict[str, Any],
    now: datetime,
) -> Row | None:
    target, kind = str(filters["target"]), str(filters["kind"])
    due = datetime.fromisoformat(filters["due_at"])
    found = await one(conn, _RECIPIENTS, {"a": row["assignee_id"], "team": row["team_id"]})
    recipients: list[int] = list(found["ids"] if found else [])
    name = TARGET_NAMES.get(target, target)
    key = "sla_timer.breached" if kind == BREACH else "sla_timer.warned"
    said = message(key, count=len(recipients), target=name, due_at=due)
    done = await _complete(conn, task, execution_id, said, now, skipped=False)
    if done is None or done.status != "COMPLETED":
        return done  # lost or cancelled at the finish: no alert, nobody told
    params = {"t": row["id"], "target": target, "kind": kind, "rev": row["revision"],
              "due": due, "now": now, "task": task.id}  # fmt: skip
    if not await rows(conn, _ALERT, params):
        return done  # unreachable under the ticket's lock; the unique row is the last word
    if kind == BREACH:
        cs, _ = sla_timers.ticket_clocks(row, now) or ([], False)
        running = [c.due_at for c in cs if c.state == "running" and c.due_at is not None]
        await rows(
            conn, _BREACHED, {"t": row["id"], "due": due, "next": min(running, default=None)}
        )
    about = {"ticket": row["id"], "title": row["title"], "target": name, "due_at": due}
    text = message("sla.breach" if kind == BREACH else "sla.warning", **about)
    link = f"/tickets/{row['id']}"
    await notifications.insert_many(
        conn, user_ids=recipients, team_id=row["team_id"], task_id=task.id,
        kind=NOTIFICATION_KIND.get(kind, "SLA_WARNING"), text=text, link=link,
    )  # fmt: skip
    alert = news.SlaAlert(row["team_id"], row["id"], str(row["title"]), name, kind, due)
    await news.sla_emails(conn, alert, tuple(recipients), now=now)
    return done
