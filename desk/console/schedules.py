"""Scheduled exports in the operators' console: the schedules of the teams in the viewer's
scope (an operator: every team), and pausing one, written to the audit trail in the same
transaction. The schedules' own rules are desk/work/schedules.py's."""

from __future__ import annotations

from desk.core.errors import NotFound
from desk.core.inputs import optional_id
from desk.core.runtime import Runtime
from desk.people import audit
from desk.people.operators import Scope
from desk.work import schedule_store as store
from desk.work.schedule_store import Schedule


async def in_scope(rt: Runtime, scope: Scope, team_id: int | None = None) -> list[Schedule]:
    """The scope's schedules; with `team_id`, that team's (none when it is outside the scope)."""
    if team_id is not None and not scope.covers(team_id):
        return []
    teams = [team_id] if team_id is not None else None if scope.operator else list(scope.team_ids)
    async with rt.engine.connect() as conn:
        return await store.in_teams(conn, teams)


async def pause(rt: Runtime, scope: Scope, schedule_id: int) -> Schedule:
    """Pause a schedule of a team in scope (NotFound otherwise, as for a missing one)."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        found = await store.get(conn, schedule_id, lock=True) if optional_id(schedule_id) else None
        if found is None or not scope.covers(found.team_id):
            raise NotFound("Schedule not found.")
        paused = await store.pause(conn, schedule_id, now=now)
        if paused is None:
            return found
        await audit.record(
            conn, at=now, actor_id=scope.user_id, actor=scope.actor, action="schedule_pause",
            team_id=found.team_id, detail=f"schedule {schedule_id} “{found.name}”",
        )  # fmt: skip
        return paused
