"""The accept statements of EMAIL tasks (desk/work/mail.py): no membership, no quota — the
desk queues e-mails itself, in the transaction of what they tell about (an invitation, a
completed export, a message in a ticket's conversation), so the message exists exactly when that
change does.

`ACCEPT_EMAIL` inserts one unsent; the dispatcher's next pass sends it once the caller has
committed (an e-mail waits at most `DISPATCH_INTERVAL` for it). A conversation message's e-mails
(`ACCEPT_MESSAGE_EMAILS`) reserve their send in the insert, and the poster hands them to Redis
right after its commit, as an accept does."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from desk.core.models import BackgroundTask
from desk.core.pg import fetched, send
from desk.ledger.accept import as_task
from desk.ledger.lanes import lane_of
from desk.ledger.sends import Due, mail_queued_sql
from desk.ledger.sql import Db, one

ACCEPT_EMAIL = """
INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters, run_at,
 max_attempts, sends, created_at, updated_at)
VALUES ('EMAIL', %(team_id)s::int, %(owner_id)s::int, %(ticket_id)s::int, %(scope_key)s::text,
 %(filters)s::jsonb,
 %(now)s::timestamptz, %(max_attempts)s::int, 0, %(now)s::timestamptz, %(now)s::timestamptz)
RETURNING *
"""


async def accept_email(
    db: Db,
    *,
    team_id: int | None,
    owner_id: int | None,
    scope_key: str,
    filters: dict[str, Any],
    max_attempts: int,
    now: datetime,
    ticket_id: int | None = None,
) -> BackgroundTask:
    """Insert one WAITING EMAIL task in the caller's transaction."""
    params = {
        "team_id": team_id, "owner_id": owner_id, "scope_key": scope_key,
        "filters": json.dumps(filters, ensure_ascii=False), "max_attempts": max_attempts,
        "now": now, "ticket_id": ticket_id,
    }  # fmt: skip
    row = await one(db, ACCEPT_EMAIL, params)
    assert row is not None, "an INSERT … RETURNING returns its row"
    return as_task(row)


# A message's e-mails (desk/work/conversation.py), one per recipient, linked to the message, in
# the message's transaction. Each is sent by its insert (`sends` 1, as every accept does) while
# the lane runs and the team's window of queued e-mails (desk/ledger/sends.py, "Fair sends") has
# room for all of them; otherwise none is, and the dispatcher tops the team up, oldest first.
ACCEPT_MESSAGE_EMAILS = f"""
WITH room AS (
  SELECT NOT EXISTS (SELECT 1 FROM task_lane WHERE name = %(lane)s AND paused)
   AND {mail_queued_sql("%(team_id)s")} + cardinality(%(owners)s::int[]) <= %(mail_max)s AS ok
),
ins AS (
  INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters, run_at,
   max_attempts, dispatched_at, sends, created_at, updated_at)
  SELECT 'EMAIL', %(team_id)s::int, x.owner_id, %(ticket_id)s::int, x.scope_key, x.filters,
   %(now)s::timestamptz, %(max_attempts)s::int,
   CASE WHEN room.ok THEN %(now)s::timestamptz END, CASE WHEN room.ok THEN 1 ELSE 0 END,
   %(now)s::timestamptz, %(now)s::timestamptz
  FROM unnest(%(owners)s::int[], %(scopes)s::text[], %(filters)s::jsonb[])
   AS x(owner_id, scope_key, filters), room
  RETURNING id, run, run_at, sends, kind, owner_id
),
link AS (
  INSERT INTO message_email (message_id, task_id, recipient_id)
  SELECT %(message_id)s::int, id, owner_id FROM ins
)
SELECT id, run, run_at, sends, kind, owner_id FROM ins ORDER BY id
"""


@dataclass(frozen=True)
class Accepted:
    """One of a message's EMAIL tasks: `send` is its reserved send (None: the dispatcher's)."""

    task_id: int
    recipient_id: int
    send: Due | None


async def accept_message_emails(
    conn: psycopg.AsyncConnection[Any],
    *,
    message_id: int,
    team_id: int,
    ticket_id: int,
    emails: list[tuple[int, str, dict[str, Any]]],
    max_attempts: int,
    mail_max: int,
    now: datetime,
) -> Any:
    """An EMAIL task per (recipient id, scope key, filters) of `emails`, each linked to the
    message, in one statement in the caller's transaction; sent, not waited for (`sql.send`):
    `accepted` reads what it wrote."""
    params = {
        "lane": lane_of("EMAIL"), "now": now, "team_id": team_id, "mail_max": mail_max,
        "owners": [e[0] for e in emails], "scopes": [e[1] for e in emails],
        "filters": [json.dumps(e[2], ensure_ascii=False) for e in emails],
        "ticket_id": ticket_id, "max_attempts": max_attempts, "message_id": message_id,
    }  # fmt: skip
    return await send(conn, ACCEPT_MESSAGE_EMAILS, params)


async def accepted(cursor: Any) -> list[Accepted]:
    """The tasks `accept_message_emails` inserted, with their reserved sends."""
    return [
        Accepted(r["id"], r["owner_id"],
                 Due(r["id"], r["run"], r["run_at"], r["sends"], r["kind"]) if r["sends"] else None)
        for r in await fetched(cursor)
    ]  # fmt: skip
