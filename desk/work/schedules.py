"""Scheduled exports, as people (GraphQL, the pages, the console) see them: create, list, pause,
resume, delete (docs/architecture.md, "Scheduled exports").

Who: a team's staff and admins schedule exports; customers may not (a customer's export covers
only their own tickets and is something they ask for when they need it, not a report the team
runs; keeping them out also keeps unattended load in the hands of the team's own people). A
schedule is visible, and changeable, by its owner and the team's admins; to anyone else it is
missing (NotFound, the same as an unknown id). The filters are checked by the same code as
createExport's (desk.work.tasks.export_request), and stored normalised.
"""

from __future__ import annotations

from typing import Any

from desk.core import inputs
from desk.core.errors import NotAllowed, NotFound, ValidationProblem
from desk.core.inputs import optional_id
from desk.core.messages import TEMPLATES
from desk.core.models import BackgroundTask
from desk.core.runtime import Runtime
from desk.people import access
from desk.work import occurrences
from desk.work import schedule_store as store
from desk.work.schedule_store import Schedule
from desk.work.tasks import export_request

# Schedules one person may own in one team: a schedule is cheap to make and runs unattended.
MAX_PER_OWNER = 50
NAME_MAX = 200


def reason_text(key: str | None) -> str | None:
    """The English sentence of a stop or skip reason (its key is stored; pages translate it)."""
    if key is None:
        return None
    found = TEMPLATES.get(key)
    return found if isinstance(found, str) else key


async def create_schedule(
    rt: Runtime,
    user_id: int,
    team_id: int,
    raw_filters: dict[str, Any] | None,
    *,
    days: object,
    time: object,
    timezone: object = None,
    name: object = None,
) -> Schedule:
    """A new active schedule; the time zone defaults to the owner's (`app_user.timezone`)."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        member = await access.require_member(conn, user_id, team_id)
        if not member.is_staff:
            raise NotAllowed("Only staff and admins can schedule exports.")
        req = export_request(rt, user_id, team_id, raw_filters, now=now)
        if req.assignee is not None:  # what the accept checks at every run, checked now too
            named = await access.membership(conn, req.assignee, team_id)
            if named is None or not named.is_staff:
                raise ValidationProblem("assignee_id", "not a staff member of this team")
        day_set = occurrences.parse_days("days", days)
        local_time = occurrences.parse_time("time", time)
        zone_raw = timezone if timezone not in (None, "") else await store.owner_zone(conn, user_id)
        zone = occurrences.parse_zone("timezone", zone_raw)
        title = inputs.line("name", name or "", max_len=NAME_MAX) or "Scheduled export"
        if await store.count_owned(conn, team_id, user_id) >= MAX_PER_OWNER:
            raise NotAllowed(f"At most {MAX_PER_OWNER} schedules per person in a team.")
        return await store.insert(
            conn,
            team_id=team_id,
            owner_id=user_id,
            name=title,
            filters=req.new.filters or {},
            days=day_set,
            local_time=local_time,
            timezone=zone,
            next_run_at=occurrences.next_after(day_set, local_time, zone, now),
            now=now,
        )


async def list_schedules(rt: Runtime, user_id: int, team_id: int) -> list[Schedule]:
    """An admin sees all of the team's schedules; anyone else their own (a customer: none)."""
    async with rt.engine.connect() as conn:
        member = await access.require_member(conn, user_id, team_id)
        owner = None if member.is_admin else user_id
        return await store.of_team(conn, team_id, owner_id=owner)


async def get_schedule(rt: Runtime, user_id: int, schedule_id: int) -> Schedule:
    async with rt.engine.connect() as conn:
        return await _visible(conn, user_id, schedule_id)


async def _visible(conn: Any, user_id: int, schedule_id: int, *, lock: bool = False) -> Schedule:
    """The schedule if `user_id` owns it (and is still a member) or administers its team."""
    found = await store.get(conn, schedule_id, lock=lock) if optional_id(schedule_id) else None
    if found is None:
        raise NotFound("Schedule not found.")
    member = await access.membership(conn, user_id, found.team_id)
    if member is None or not (member.is_admin or found.owner_id == user_id):
        raise NotFound("Schedule not found.")
    return found


async def pause_schedule(rt: Runtime, user_id: int, schedule_id: int) -> Schedule:
    """No more occurrences until resumed (pausing a paused or stopped one changes nothing)."""
    async with rt.engine.begin() as conn:
        found = await _visible(conn, user_id, schedule_id, lock=True)
        return await store.pause(conn, schedule_id, now=rt.clock()) or found


async def resume_schedule(rt: Runtime, user_id: int, schedule_id: int) -> Schedule:
    """Active again from the next occurrence after now (what was missed while paused does not
    run). A stopped schedule resumes only when its owner may export the team's tickets again."""
    now = rt.clock()
    async with rt.engine.begin() as conn:
        found = await _visible(conn, user_id, schedule_id, lock=True)
        if found.state == store.ACTIVE:
            return found
        owner = await access.membership(conn, found.owner_id, found.team_id)
        if owner is None or not owner.is_staff:
            raise NotAllowed("Its owner may no longer export this team's tickets.")
        nxt = occurrences.next_after(found.days, found.local_time, found.timezone, now)
        return await store.resume(conn, schedule_id, next_run_at=nxt, now=now)


async def delete_schedule(rt: Runtime, user_id: int, schedule_id: int) -> Schedule:
    """Gone, with its occurrences' record; the tasks it made stay (they are ordinary exports)."""
    async with rt.engine.begin() as conn:
        found = await _visible(conn, user_id, schedule_id, lock=True)
        await store.delete(conn, schedule_id)
        return found


async def runs(rt: Runtime, user_id: int, schedule_id: int) -> list[store.Run]:
    async with rt.engine.connect() as conn:
        await _visible(conn, user_id, schedule_id)
        return await store.runs(conn, schedule_id)


async def last_tasks(rt: Runtime, user_id: int, found: list[Schedule]) -> dict[int, BackgroundTask]:
    """The last export of each schedule in `found` that `user_id` may see, by task id, in one
    read: exports are their owner's alone, so a team admin sees the schedule but not the export
    another person's schedule made (desk.people.access.can_see_task decides)."""
    ids = sorted({s.last_task_id for s in found if s.last_task_id})
    if not ids:
        return {}
    async with rt.engine.connect() as conn:
        rows = await store.tasks(conn, ids)
        members = {t: await access.membership(conn, user_id, t) for t in {r.team_id for r in rows}}
    seen = {}
    for task in rows:
        member = members.get(task.team_id)
        if member is not None and access.can_see_task(member, task.kind, task.owner_id):
            seen[task.id or 0] = task
    return seen
