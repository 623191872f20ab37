"""desk.reads.tasks: the one hot read API. Every visibility rule on it (a task you may not see reads
as missing), the rule's two forms (`access.can_see_task`, `access.task_visibility_sql`) equal to
the promised table over the whole matrix, and one statement per question."""

from __future__ import annotations

import itertools

import pytest
import sqlalchemy as sa
from psycopg import sql

from desk.core.errors import NotFound
from desk.core.models import Role, TaskKind
from desk.core.runtime import Runtime
from desk.people import access, sessions
from desk.reads import tasks as reads
from desk.work import tasks
from tests.counting import counting
from tests.desk.visibility import KINDS, MISSING, PEOPLE, insert_task
from tests.factories import World


async def _role(rt: Runtime, user: int, team: int) -> Role | None:
    async with rt.engine.connect() as conn:
        member = await access.membership(conn, user, team)
    return member.role if member else None


def _rule(world: World, role: Role | None, user: int, kind: str, owner: int) -> bool:
    if role is None:
        return False
    return access.can_see_task(access.Member(user, world.team, role), kind, owner)


# The promise, spelt out apart from `access.TASK_REACH`: role -> kind -> (sees their own,
# sees another member's). Exports are their owner's alone; reminders are staff work; an admin
# sees every import, staff their own; a test task is its owner's; an e-mail is nobody's; a
# mailbox's fetch and parse are the admins'; a ticket's SLA timers and time-rule runs are staff work.
PROMISED = {
    Role.ADMIN: {"EXPORT": (True, False), "REMINDER": (True, True), "IMPORT": (True, True), "NOOP": (True, False), "EMAIL": (False, False), "MAIL_FETCH": (True, True), "MAIL_PARSE": (True, True), "SLA_TIMER": (True, True), "TIME_RULE": (True, True)},
    Role.STAFF: {"EXPORT": (True, False), "REMINDER": (True, True), "IMPORT": (True, False), "NOOP": (True, False), "EMAIL": (False, False), "MAIL_FETCH": (False, False), "MAIL_PARSE": (False, False), "SLA_TIMER": (True, True), "TIME_RULE": (True, True)},
    Role.CUSTOMER: {"EXPORT": (True, False), "REMINDER": (False, False), "IMPORT": (False, False), "NOOP": (True, False), "EMAIL": (False, False), "MAIL_FETCH": (False, False), "MAIL_PARSE": (False, False), "SLA_TIMER": (False, False), "TIME_RULE": (False, False)},
}  # fmt: skip


def _promised(role: Role | None, kind: str, mine: bool) -> bool:
    return role is not None and PROMISED[role][kind][0 if mine else 1]


async def test_both_forms_of_the_rule_are_the_promise_over_the_whole_matrix(rt: Runtime) -> None:
    """role (ADMIN, STAFF, CUSTOMER, no membership) x every TaskKind x owner (self, other): the
    Python predicate and the SQL condition (evaluated by PostgreSQL) both answer the promise."""
    assert {k.value for k in TaskKind} == set(KINDS) == set(PROMISED[Role.ADMIN])
    assert set(PROMISED) == set(Role)
    condition = access.task_visibility_sql(
        sql.SQL("%(role)s::text"), sql.SQL("%(kind)s::text"), sql.SQL("%(owner)s::bigint"),
        sql.SQL("%(me)s::bigint"),
    )  # fmt: skip
    statement = sql.SQL("SELECT ({}) AS seen").format(condition).as_string(None)
    me, other = 7, 8
    for role, kind, mine in itertools.product((*Role, None), KINDS, (True, False)):
        owner = me if mine else other
        promised = _promised(role, kind, mine)
        python = role is not None and access.can_see_task(access.Member(me, 1, role), kind, owner)
        params = {"role": role and role.value, "kind": kind, "owner": owner, "me": me}
        found = await rt.pg.one(statement, params)
        assert found is not None
        assert (python, bool(found["seen"])) == (promised, promised), (role, kind, mine)


async def test_reads_follow_the_promise_as_member_removed_and_of_another_team(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int]
) -> None:
    """Every role x kind x owner through the reads (one task: the Python form; a list: the SQL
    form) as a member; then the same people's own tasks in a team they are not in; then removed."""
    other_of = {"admin": "staff", "staff": "admin", "customer": "staff"}
    elsewhere = {
        (kind, who): await insert_task(rt, kind, world.other_team, getattr(world, who), None)
        for kind, who in itertools.product(KINDS, other_of)
    }
    for who, other in other_of.items():
        user = getattr(world, who)
        role = await _role(rt, user, world.team)
        assert role is not None
        seen = set()
        for kind, mine in itertools.product(KINDS, (True, False)):
            task_id = ledger[(kind, who if mine else other)]
            hit = await reads.task(rt.pg, user, task_id)
            assert (hit.task is not None) == _promised(role, kind, mine), (who, kind, mine)
            if hit.task is not None:
                seen.add(task_id)
            assert (await reads.task(rt.pg, user, elsewhere[(kind, who)])).task is None
        listed = {t.id for t in (await reads.list_tasks(rt.pg, user, world.team, first=100)).items}
        assert seen <= listed and not listed & set(elsewhere.values()), who
        with pytest.raises(NotFound):
            await reads.list_tasks(rt.pg, user, world.other_team)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("DELETE FROM membership WHERE team_id = :t AND user_id = ANY(:u)"),
            {"t": world.team, "u": [world.admin, world.staff, world.customer]},
        )
    for who in other_of:
        user = getattr(world, who)
        assert await reads.tasks(rt.pg, user, list(ledger.values())) == {}, who
        with pytest.raises(NotFound):
            await reads.list_tasks(rt.pg, user, world.team)


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
