"""The console's audit trail: every action (who, what, which tasks, when), written in the same
transaction as the change it records, and read back scoped like everything else."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.runtime import Runtime

ACTIONS = (
    "retry",
    "cancel",
    "group_retry",
    "group_cancel",
    "lane_pause",
    "lane_resume",
    "operator_add",
    "operator_remove",
    "schedule_pause",
    # People (desk/people/teams.py, invitations.py, resets.py, members.py). Never a token.
    "team_create",
    "invite",
    "invitation_revoke",
    "invitation_accept",
    "member_add",
    "member_role",
    "member_remove",
    "password_reset_request",
    "password_reset",
    # The conversation (desk/work/conversation.py): an admin's redaction of a message.
    "message_redact",
    # A team's time rules acting on a ticket (desk/work/rule_runs.py); no person acted.
    "time_rule",
)


@dataclass(frozen=True)
class Entry:
    id: int
    at: datetime
    actor: str
    action: str
    team_id: int | None
    task_ids: list[int]
    count: int
    detail: str


async def record(
    conn: AsyncConnection,
    *,
    at: datetime,
    actor_id: int | None,
    actor: str,
    action: str,
    team_id: int | None = None,
    task_ids: Sequence[int] = (),
    detail: str = "",
) -> None:
    assert action in ACTIONS, action
    await conn.execute(
        sa.text(
            "INSERT INTO ops_audit (at, actor_id, actor, action, team_id, task_ids, count, detail) "
            "VALUES (:at, :aid, :actor, :action, :team, :ids, :n, :detail)"
        ),
        {
            "at": at,
            "aid": actor_id,
            "actor": actor,
            "action": action,
            "team": team_id,
            "ids": list(task_ids),
            "n": len(task_ids),
            "detail": detail[:2000],
        },
    )


async def actor_of(conn: AsyncConnection, user_id: int | None) -> str:
    """What the trail names a person by: their e-mail ("cli" for the command line)."""
    if user_id is None:
        return "cli"
    row = (
        await conn.execute(sa.text("SELECT email FROM app_user WHERE id = :u"), {"u": user_id})
    ).first()
    return str(row.email) if row else f"user #{user_id}"


async def recent(
    rt: Runtime,
    *,
    operator: bool,
    team_ids: Sequence[int],
    task_id: int | None = None,
    limit: int = 50,
) -> list[Entry]:
    """Newest first. A team admin sees the entries about their teams only (site-wide entries,
    such as granting the operator role, are an operator's business)."""
    clauses = ["true"] if operator else ["team_id = ANY(:teams)"]
    params: dict[str, object] = {"teams": list(team_ids), "lim": limit}
    if task_id is not None:
        clauses.append("task_ids @> ARRAY[CAST(:task AS bigint)]")
        params["task"] = task_id
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT id, at, actor, action, team_id, task_ids, count, detail FROM ops_audit "
                f"WHERE {' AND '.join(clauses)} ORDER BY id DESC LIMIT :lim"
            ),
            params,
        )
        return [Entry(**r._mapping) for r in rows]
