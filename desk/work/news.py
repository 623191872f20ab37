"""News that reaches people: what a finished task tells its people (an export, a reminder, an
SLA warning or breach), in the transaction that finishes it — an in-app notification always,
an e-mail to whoever asked for one (`notification_preference`, desk/people/preferences.py).
Both commit with the task's end or not at all, so each piece of news is written exactly once
however often the task is retried or rescued (docs/architecture.md, "E-mail")."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import ValidationProblem
from desk.core.messages import message
from desk.helpdesk import notifications
from desk.work import mail

log = logging.getLogger("taskdesk.news")
EXPORT_READY = "EXPORT_READY"  # notification kind

_OWNER = sa.text(
    "SELECT u.email, u.locale, u.timezone, t.name AS team_name, "
    " coalesce(p.export_ready_email, false) AS wants_email "
    "FROM app_user u JOIN team t ON t.id = :team "
    "LEFT JOIN notification_preference p ON p.user_id = u.id WHERE u.id = :u"
)


def _wanting(choice: str) -> sa.TextClause:
    """Of a list of people, those who ticked `choice` (a `notification_preference` column)."""
    return sa.text(
        "SELECT u.id, u.email, u.locale, u.timezone FROM app_user u "
        f"JOIN notification_preference p ON p.user_id = u.id AND p.{choice} "
        "WHERE u.id = ANY(:ids) ORDER BY u.id"
    )


_REMINDED = _wanting("reminder_email")
_SLA_WANTING = _wanting("sla_email")


def download_path(task_id: int) -> str:
    return f"/tasks/{task_id}/download"


async def export_ready(
    conn: AsyncConnection,
    *,
    task_id: int,
    team_id: int,
    owner_id: int,
    rows: int,
    expires_at: datetime,
    now: datetime,
) -> int | None:
    """ "Export #N is ready" for its owner (in-app), and by e-mail when they asked for it.
    Returns the EMAIL task's id, or None when no e-mail was queued."""
    link = download_path(task_id)
    said = message("export.ready", task=task_id, rows=rows, expires_at=expires_at)
    await notifications.insert_many(
        conn, user_ids=[owner_id], team_id=team_id, task_id=task_id, kind=EXPORT_READY,
        text=said, link=link,
    )  # fmt: skip
    owner = (await conn.execute(_OWNER, {"team": team_id, "u": owner_id})).first()
    if owner is None or not owner.wants_email:
        return None
    params: dict[str, object] = {
        "task_id": task_id, "team_name": owner.team_name, "rows": rows, "link": link,
        "expires_at": expires_at,
    }  # fmt: skip
    return await _queue(
        conn, to=owner.email, template="export_ready", params=params, locale=owner.locale,
        timezone=owner.timezone, team_id=team_id, user_id=owner_id, now=now,
    )  # fmt: skip


@dataclass(frozen=True)
class Reminded:
    """One fired reminder: its team, ticket and the people it notified."""

    team_id: int
    ticket_id: int
    ticket_title: str
    recipients: tuple[int, ...]


async def reminder_emails(
    conn: AsyncConnection, fired: list[Reminded], *, now: datetime
) -> list[int]:
    """An e-mail to each reminded person who asked for reminders by e-mail (one read for a whole
    batch of reminders); the EMAIL task ids."""
    everyone = sorted({u for r in fired for u in r.recipients})
    if not everyone:
        return []
    wanting = {r.id: r for r in (await conn.execute(_REMINDED, {"ids": everyone})).all()}
    queued: list[int | None] = []
    for r in fired:
        params: dict[str, object] = {
            "ticket_id": r.ticket_id, "ticket_title": r.ticket_title[:500],
            "link": f"/tickets/{r.ticket_id}",
        }  # fmt: skip
        people = [wanting[u] for u in r.recipients if u in wanting]
        queued += await _mail_each(conn, people, "reminder", params, team_id=r.team_id, now=now)
    return [i for i in queued if i is not None]


@dataclass(frozen=True)
class SlaAlert:
    """One fired SLA warning or breach (desk/work/sla_firing.py)."""

    team_id: int
    ticket_id: int
    ticket_title: str
    target: str  # the target's English name ("first response")
    kind: str  # warning | breach
    due_at: datetime


async def sla_emails(
    conn: AsyncConnection, alert: SlaAlert, recipients: tuple[int, ...], *, now: datetime
) -> list[int]:
    """An e-mail to each notified person who asked for SLA alerts by e-mail (`sla_email`), in
    the transaction that fires the alert; the EMAIL task ids."""
    if not recipients:
        return []
    wanting = (await conn.execute(_SLA_WANTING, {"ids": list(recipients)})).all()
    params: dict[str, object] = {
        "ticket_id": alert.ticket_id, "ticket_title": alert.ticket_title[:500],
        "target": alert.target, "kind": alert.kind, "due_at": alert.due_at,
        "link": f"/tickets/{alert.ticket_id}",
    }  # fmt: skip
    queued = await _mail_each(conn, wanting, "sla_alert", params, team_id=alert.team_id, now=now)
    return [i for i in queued if i is not None]


async def _mail_each(
    conn: AsyncConnection,
    people: Sequence[Any],
    template: str,
    params: dict[str, object],
    *,
    team_id: int,
    now: datetime,
) -> list[int | None]:
    """One e-mail of `template` to each of `people` (`_wanting` rows), in their language and
    zone."""
    queued = []
    for p in people:
        queued.append(
            await _queue(conn, to=p.email, template=template, params=params, locale=p.locale,
                         timezone=p.timezone, team_id=team_id, user_id=p.id, now=now)
        )  # fmt: skip
    return queued


async def _queue(conn: AsyncConnection, **kw: Any) -> int | None:
    """`mail.queue_email`, but an address or time zone it refuses (an old account's) costs only
    that e-mail, never the task that is finishing: it is checked before anything is written."""
    try:
        return await mail.queue_email(conn, **kw)
    except ValidationProblem as exc:
        log.warning("no e-mail to user %s: %s", kw.get("user_id"), exc)
        return None
