"""desk.reads.tasks: the one hot read API. Every visibility rule on it (a task you may not see reads
as missing), its list rule equal to `access.can_see_task`, and one statement per question."""

from __future__ import annotations

import pytest

from desk.core.errors import NotFound
from desk.core.models import Role, TaskKind
from desk.core.runtime import Runtime
from desk.people import access, sessions
from desk.reads import tasks as reads
from desk.work import tasks
from tests.counting import counting
from tests.desk.visibility import MISSING, PEOPLE
from tests.factories import World


async def _role(rt: Runtime, user: int, team: int) -> Role | None:
    async with rt.engine.connect() as conn:
        member = await access.membership(conn, user, team)
    return member.role if member else None


def _rule(world: World, role: Role | None, user: int, kind: str, owner: int) -> bool:
    if role is None:
        return False
    return access.can_see_task(access.Member(user, world.team, role), kind, owner)


@pytest.mark.parametrize("who", PEOPLE)
async def test_one_task_follows_can_see_task_and_hides_like_missing(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int], who: str
) -> None:
    user = getattr(world, who)
    role = await _role(rt, user, world.team)
    for (kind, owner), task_id in ledger.items():
        allowed = _rule(world, role, user, kind, getattr(world, owner))
        hit = await reads.task(rt.pg, user, task_id)
        assert (hit.task is not None) == allowed, (who, kind, owner)
        if allowed:
            assert hit.task is not None and hit.task.id == task_id
            assert (await tasks.get_task(rt, user, task_id)).id == task_id  # the desk agrees
        else:
            assert hit == await reads.task(rt.pg, user, MISSING) == reads.TaskHit(None)
            with pytest.raises(NotFound):
                await tasks.get_task(rt, user, task_id)


@pytest.mark.parametrize("who", PEOPLE)
async def test_many_tasks_at_once_follow_the_one_task_rule(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int], who: str
) -> None:
    """`reads.tasks` (a page watcher's changed rows): exactly the hits of `reads.task`, a hidden
    task absent as a missing one."""
    user = getattr(world, who)
    ids = [*ledger.values(), MISSING]
    many = await reads.tasks(rt.pg, user, ids)
    one = {i: await reads.task(rt.pg, user, i) for i in ids}
    assert many == {i: hit for i, hit in one.items() if hit.task is not None}
    assert await reads.tasks(rt.pg, user, []) == {}


@pytest.mark.parametrize("who", PEOPLE)
async def test_lists_use_the_same_rule_as_one_task(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int], who: str
) -> None:
    user = getattr(world, who)
    role = await _role(rt, user, world.team)
    if role is None:  # not a member: the team does not exist for them, as a missing team
        with pytest.raises(NotFound):
            await reads.list_tasks(rt.pg, user, world.team)
        with pytest.raises(NotFound):
            await reads.list_tasks(rt.pg, user, MISSING)
        with pytest.raises(NotFound):
            await reads.anything_newer(rt.pg, user, world.team, 0)
        return
    expected = sorted(
        (tid for (k, o), tid in ledger.items() if _rule(world, role, user, k, getattr(world, o))),
        reverse=True,
    )
    page = await reads.list_tasks(rt.pg, user, world.team, first=100)
    assert [t.id for t in page.items] == expected
    desk_page = await tasks.list_tasks(rt, user, world.team, first=100)
    assert [t.id for t in desk_page.items] == expected  # the desk's list agrees
    assert await reads.anything_newer(rt.pg, user, world.team, 0) == bool(expected)
    assert not await reads.anything_newer(rt.pg, user, world.team, max(ledger.values()))


async def test_list_pages_and_titles(rt: Runtime, world: World, ledger: dict) -> None:
    first = await reads.list_tasks(rt.pg, world.staff, world.team, first=2)
    assert first.has_next and len(first.items) == 2
    rest = await reads.list_tasks(rt.pg, world.staff, world.team, first=50, after=first.end_cursor)
    assert all(t.id < first.items[-1].id for t in rest.items) and not rest.has_next
    reminders = await reads.list_tasks(rt.pg, world.staff, world.team, kind=TaskKind.REMINDER)
    assert {t.kind for t in reminders.items} == {"REMINDER"}
    assert reminders.titles == {world.tickets["login"]: "Cannot log in"}
    assert reminders.paused_lanes == frozenset()  # no lane paused


async def test_viewer_reads_session_person_teams_and_task_at_once(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int]
) -> None:
    secret, _ = await sessions.open_session(rt, world.customer)
    now = rt.clock()
    own, staffs = ledger[("EXPORT", "customer")], ledger[("EXPORT", "staff")]
    seen = await reads.viewer(rt.pg, secret, now, teams=True, task_id=own)
    assert seen is not None and seen.person.id == world.customer
    assert [t.team_name for t in seen.teams or []] == ["Acme"]
    assert seen.task is not None and seen.task.task is not None and seen.task.task.id == own
    for hidden in (staffs, ledger[("REMINDER", "customer")], MISSING):
        other = await reads.viewer(rt.pg, secret, now, task_id=hidden)
        assert other is not None and other.task == reads.TaskHit(None)
    assert await reads.viewer(rt.pg, "not-a-session", now, task_id=own) is None
    await sessions.revoke(rt, secret)
    assert await reads.viewer(rt.pg, secret, now, task_id=own) is None


# --- what a question costs ------------------------------------------------------------------


async def test_a_task_read_with_its_session_is_one_statement(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int]
) -> None:
    secret, _ = await sessions.open_session(rt, world.staff)
    with counting(rt.pg) as seen:
        found = await reads.viewer(rt.pg, secret, rt.clock(), task_id=ledger[("REMINDER", "admin")])
    assert found is not None and found.task is not None and found.task.ticket_title
    assert seen[0] == "checkout" and len(seen) == 2, seen
    with counting(rt.pg) as seen:
        await reads.list_tasks(rt.pg, world.staff, world.team)
    assert len(seen) == 2, seen
