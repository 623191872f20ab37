"""Operators' view of the ledger (the `taskdesk tasks` command): every task, no visibility
rules — whoever runs the CLI already holds the database credentials."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from desk.console.health import Health
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import BackgroundTask, TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.ledger import accept as ledger
from desk.ledger import sends
from desk.ledger.lanes import lane_of
from desk.work.tasks import kick


@dataclass(frozen=True)
class OpsRow:
    task: BackgroundTask
    team: str
    owner: str


async def list_tasks(
    rt: Runtime,
    *,
    status: str | None = None,
    kind: str | None = None,
    team: str | None = None,
    limit: int = 20,
) -> list[OpsRow]:
    clauses: list[str] = ["true"]
    params: dict[str, object] = {"lim": limit}
    if status:
        if status.upper() not in {s.value for s in TaskStatus}:
            raise ValidationProblem(
                "status", f"use one of {', '.join(s.value for s in TaskStatus)}"
            )
        clauses.append("b.status = :status")
        params["status"] = status.upper()
    if kind:
        if kind.upper() not in {k.value for k in TaskKind}:
            raise ValidationProblem("kind", f"use one of {', '.join(k.value for k in TaskKind)}")
        clauses.append("b.kind = :kind")
        params["kind"] = kind.upper()
    if team:
        clauses.append("t.name = :team")
        params["team"] = team
    return await rows_where(rt, clauses, params)


async def rows_where(rt: Runtime, clauses: list[str], params: dict[str, object]) -> list[OpsRow]:
    """Tasks matching every clause (over `b` the task, `t` its team), newest first, up to
    `params["lim"]`, with their team's name and owner's e-mail: the CLI's list and the console's
    search share it."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                # LEFT: an e-mail may have no team or owner (desk/work/mail.py).
                "SELECT b.*, coalesce(t.name, '') AS team_name, coalesce(u.email, '') AS owner_email "
                "FROM background_task b LEFT JOIN team t ON t.id = b.team_id "
                "LEFT JOIN app_user u ON u.id = b.owner_id "
                f"WHERE {' AND '.join(clauses)} ORDER BY b.id DESC LIMIT :lim"
            ),
            params,
        )
        out = []
        for r in rows:
            data = dict(r._mapping)
            team_name, owner = data.pop("team_name"), data.pop("owner_email")
            out.append(OpsRow(BackgroundTask(**data), team_name, owner))
        return out


async def get(rt: Runtime, task_id: int) -> BackgroundTask:
    async with rt.engine.connect() as conn:
        task = await ledger.get(conn, task_id)
    if task is None:
        raise NotFound(f"No task {task_id}.")
    return task


async def diagnosis(rt: Runtime, task: BackgroundTask, health: Health) -> str:
    """`diagnose`, with what the ledger says holds a waiting task back: the CLI's `tasks show`
    and the console's task page say the same."""
    hold = None
    if task.status == TaskStatus.WAITING:
        async with rt.engine.connect() as conn:
            hold = await sends.hold(
                conn, task.kind, task.team_id, team_max=rt.settings.long_team_max_running
            )
    return diagnose(task, health, rt.clock(), rt.settings.redelivery_seconds, hold)


def diagnose(
    task: BackgroundTask,
    health: Health,
    now: datetime,
    redelivery: float,
    hold: sends.Hold | None = None,
) -> str:
    """One sentence for "it has a task id but it keeps waiting"."""
    if task.status == TaskStatus.WAITING:
        return _waiting(task, health, now, redelivery, hold or sends.Hold())
    if task.status == TaskStatus.RUNNING:
        if task.lease_until and task.lease_until < now:
            return (
                "Running, but its lease expired: the worker died; the rescuer re-arms it shortly."
            )
        return "Running: its worker renewed the lease recently."
    return f"Finished ({task.status.lower()})."


def _waiting(
    task: BackgroundTask, health: Health, now: datetime, redelivery: float, hold: sends.Hold
) -> str:
    if hold.lane_paused:  # first: nothing below sends it while the pause lasts
        lane = lane_of(task.kind)
        return (
            f"Waiting: its lane ({lane}) is paused by an operator; "
            "it is sent when the lane is resumed."
        )
    if task.run_at > now:
        return f"Scheduled: due in {(task.run_at - now).total_seconds():.0f} s."
    if not health.redis_ok:
        return "Waiting: Redis is unreachable; the dispatcher resends it once Redis is back."
    if not health.workers:
        return "Waiting: no worker is alive. Start one with `taskdesk worker`; nothing is lost."
    if task.dispatched_at is None and hold.team_full:
        return (
            "Waiting: its team already runs as many long tasks as one team may "
            "(LONG_TEAM_MAX_RUNNING); it is sent when one of them ends."
        )
    if task.dispatched_at is None:
        return "Waiting: not handed to the queue yet; the dispatcher sends it on its next pass."
    if now - task.dispatched_at > timedelta(seconds=redelivery * 2):
        return "Waiting: sent but not started; workers may be busy (see queue depth) or failing."
    return "Waiting: handed to the queue; a worker should start it within moments."


async def cancel(rt: Runtime, task_id: int) -> BackgroundTask:
    """Cancel as every other face does (`ledger.cancel_task`: a reminder's ticket gets a new
    revision first); a task already ended is shown as it is."""
    async with rt.engine.begin() as conn:
        task = await ledger.cancel_id(conn, task_id, now=rt.clock())
    return task or await get(rt, task_id)


async def retry(rt: Runtime, task_id: int) -> BackgroundTask:
    async with rt.engine.begin() as conn:
        try:
            task = await ledger.retry(conn, task_id, now=rt.clock())
        except ledger.ScopeHeld:
            raise ValidationProblem(
                "id", "an identical task is already queued or running; retry it later"
            ) from None
    if task is None:
        raise ValidationProblem("id", "only a failed task can be retried")
    await kick(rt, task)
    return task


async def user_id_by_email(rt: Runtime, email: str) -> int:
    async with rt.engine.connect() as conn:
        uid = (
            await conn.execute(
                sa.text("SELECT id FROM app_user WHERE lower(email) = lower(:e)"), {"e": email}
            )
        ).scalar()
    if uid is None:
        raise NotFound(f"No user with email {email}.")
    return int(uid)


async def team_id_by_name(rt: Runtime, name: str) -> int:
    async with rt.engine.connect() as conn:
        tid = (
            await conn.execute(sa.text("SELECT id FROM team WHERE name = :n"), {"n": name})
        ).scalar()
    if tid is None:
        raise NotFound(f"No team named {name!r}.")
    return int(tid)


async def first_admin(rt: Runtime, team_id: int) -> int:
    """The team's longest-standing admin: who the CLI acts as when no --user is given."""
    async with rt.engine.connect() as conn:
        uid = (
            await conn.execute(
                sa.text(
                    "SELECT user_id FROM membership WHERE team_id = :t AND role = 'ADMIN' "
                    "ORDER BY created_at, user_id LIMIT 1"
                ),
                {"t": team_id},
            )
        ).scalar()
    if uid is None:
        raise NotFound("That team has no admin to run the import as; pass --user.")
    return int(uid)
