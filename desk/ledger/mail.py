"""The accept statement of an EMAIL task (desk/work/mail.py): no membership, no quota — the
desk queues e-mails itself, in the transaction of what they tell about (an invitation, a
completed export), so the message exists exactly when that change does.

The row is inserted unsent; the dispatcher's next pass sends it once the caller has committed
(an e-mail waits at most `DISPATCH_INTERVAL` for it)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from desk.core.models import BackgroundTask
from desk.ledger.accept import as_task
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
