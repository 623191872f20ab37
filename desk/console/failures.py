"""Failures grouped by their normalised error, and the console's audited actions on tasks: retry
or cancel one task, retry or cancel a whole group.

An error is normalised by replacing quoted text and numbers, so "row 17 is bad" and "row 912 is
bad" are one group; a number is one N however it is written ("1,000,000", "2.5"), so the
title stays readable. A group also carries its newest error's message key and figures, when it
has one, for the reader's language (ui.texts.error_title). The actions go through
`desk.ledger.accept` (retry, cancel) one row at a time, each in a savepoint so one task that
cannot move (an identical task is active) does not stop the rest.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.console.overview import task_in_scope
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import BackgroundTask, TaskStatus
from desk.core.runtime import Runtime
from desk.ledger import accept as ledger
from desk.people import audit
from desk.people.operators import Scope
from desk.work.tasks import kick

NORMALISED = (
    "regexp_replace(regexp_replace(left(b.last_error, 400), "
    "'''[^'']*''|\"[^\"]*\"', '…', 'g'), '[0-9]+([.,][0-9]+)*', 'N', 'g')"
)
# A group: tasks that failed for good, and tasks waiting to retry after an error.
IN_GROUPS = "b.last_error IS NOT NULL AND (b.status = 'FAILED' OR (b.status = 'WAITING' AND b.attempts > 0))"


@dataclass(frozen=True)
class Group:
    key: str
    error: str  # normalised
    failed: int
    retrying: int
    kinds: list[str]
    first_seen: datetime
    last_seen: datetime
    sample_id: int
    sample: str
    sample_key: str | None  # the newest error as a message key, when it has one
    sample_params: dict[str, Any]
    max_id: int

    @property
    def total(self) -> int:
        return self.failed + self.retrying


async def groups(rt: Runtime, scope: Scope, *, limit: int = 100) -> list[Group]:
    where, params = scope.sql()
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                f"SELECT md5(n) AS key, n AS error, "
                " count(*) FILTER (WHERE status = 'FAILED') AS failed, "
                " count(*) FILTER (WHERE status = 'WAITING') AS retrying, "
                " array_agg(DISTINCT kind) AS kinds, min(seen) AS first_seen, "
                " max(seen) AS last_seen, max(id) AS sample_id, max(id) AS max_id, "
                " (array_agg(last_error ORDER BY id DESC))[1] AS sample, "
                " (array_agg(error_key ORDER BY id DESC))[1] AS sample_key, "
                " (array_agg(error_params ORDER BY id DESC))[1] AS sample_params "
                "FROM (SELECT b.id, b.kind, b.status, b.last_error, b.error_key, b.error_params, "
                f"  {NORMALISED} AS n, "
                "  coalesce(b.finished_at, b.updated_at) AS seen FROM background_task b "
                f"  WHERE {IN_GROUPS} AND {where}) f "
                "GROUP BY n ORDER BY count(*) DESC, max(id) DESC LIMIT :lim"
            ),
            {**params, "lim": limit},
        )
        return [Group(**r._mapping) for r in rows]


async def group(rt: Runtime, scope: Scope, key: str) -> Group:
    found = next((g for g in await groups(rt, scope, limit=1000) if g.key == key), None)
    if found is None:
        raise NotFound("No such group of failures (it may have been retried or cancelled).")
    return found


async def _members(
    conn: AsyncConnection, scope: Scope, key: str, status: str, max_id: int
) -> list[tuple[int, int]]:
    """(task id, team id) of the group's tasks in `status`, up to the confirmed `max_id`, locked."""
    where, params = scope.sql()
    rows = await conn.execute(
        sa.text(
            f"SELECT b.id, b.team_id FROM background_task b WHERE {IN_GROUPS} AND {where} "
            f" AND b.status = :status AND b.id <= :max_id AND md5({NORMALISED}) = :key "
            "ORDER BY b.id FOR UPDATE SKIP LOCKED"
        ),
        {**params, "status": status, "max_id": max_id, "key": key},
    )
    return [(r.id, r.team_id) for r in rows]


@dataclass(frozen=True)
class Outcome:
    done: list[int]
    skipped: int  # could not move (an identical task is active, or it changed meanwhile)


async def retry_group(rt: Runtime, scope: Scope, key: str, max_id: int) -> Outcome:
    """Retry every FAILED task of the group (as confirmed: ids up to max_id)."""
    now = rt.clock()
    changed: list[BackgroundTask] = []
    by_team: dict[int, list[int]] = defaultdict(list)
    async with rt.engine.begin() as conn:
        members = await _members(conn, scope, key, TaskStatus.FAILED, max_id)
        for task_id, team_id in members:
            task = await _retry_one(conn, task_id, now)
            if task is not None:
                changed.append(task)
                by_team[team_id].append(task_id)
        for team_id, ids in by_team.items():
            await audit.record(
                conn, at=now, actor_id=scope.user_id, actor=scope.actor, action="group_retry",
                team_id=team_id, task_ids=ids, detail=key,
            )  # fmt: skip
    for task in changed:
        await kick(rt, task)
    return Outcome([t.id or 0 for t in changed], len(members) - len(changed))


async def cancel_group(rt: Runtime, scope: Scope, key: str, max_id: int) -> Outcome:
    """Cancel every task of the group still waiting to retry."""
    now = rt.clock()
    by_team: dict[int, list[int]] = defaultdict(list)
    async with rt.engine.begin() as conn:
        members = await _members(conn, scope, key, TaskStatus.WAITING, max_id)
        for task_id, team_id in members:
            if await ledger.cancel_id(conn, task_id, now=now) is not None:
                by_team[team_id].append(task_id)
        for team_id, ids in by_team.items():
            await audit.record(
                conn, at=now, actor_id=scope.user_id, actor=scope.actor, action="group_cancel",
                team_id=team_id, task_ids=ids, detail=key,
            )  # fmt: skip
    done = [i for ids in by_team.values() for i in ids]
    return Outcome(done, len(members) - len(done))


async def group_count(rt: Runtime, scope: Scope, key: str, action: str) -> tuple[int, int]:
    """(how many tasks the action would touch, max id) — what the confirmation shows."""
    g = await group(rt, scope, key)
    if action not in ("retry", "cancel"):
        raise ValidationProblem("action", "use retry or cancel")
    return (g.failed if action == "retry" else g.retrying), g.max_id


async def _retry_one(conn: AsyncConnection, task_id: int, now: datetime) -> BackgroundTask | None:
    try:
        return await ledger.retry(conn, task_id, now=now)
    except ledger.ScopeHeld:  # an identical task is already active: that one stands
        return None


# --- one task -------------------------------------------------------------------------------


async def retry_task(rt: Runtime, scope: Scope, task_id: int) -> BackgroundTask:
    found = await task_in_scope(rt, scope, task_id)
    if found.task.status != TaskStatus.FAILED:
        raise ValidationProblem("id", "only a failed task can be retried")
    now = rt.clock()
    async with rt.engine.begin() as conn:
        task = await _retry_one(conn, task_id, now)
        if task is None:
            raise ValidationProblem(
                "id", "an identical task is already queued or running, or this one changed"
            )
        await audit.record(
            conn, at=now, actor_id=scope.user_id, actor=scope.actor, action="retry",
            team_id=task.team_id, task_ids=[task_id],
        )  # fmt: skip
    await kick(rt, task)
    return task


async def cancel_task(rt: Runtime, scope: Scope, task_id: int) -> BackgroundTask:
    found = await task_in_scope(rt, scope, task_id)
    now = rt.clock()
    async with rt.engine.begin() as conn:
        task = await ledger.cancel_id(conn, task_id, now=now)
        if task is None:
            raise ValidationProblem("id", "only a queued or running task can be cancelled")
        await audit.record(
            conn, at=now, actor_id=scope.user_id, actor=scope.actor, action="cancel",
            team_id=found.task.team_id, task_ids=[task_id],
        )  # fmt: skip
    return task
