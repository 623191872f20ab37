"""desk.reads.tick: the page watcher's one statement gives exactly what the separate reads gave — the
session with its person, teams and unread count (`reads.viewer`), every watched row as
`reads.tasks` reads it (a hidden row absent exactly as a missing one), and the list's rows newer
than N as `reads.list_tasks` pages them (None for a non-member) — for every role, a removed
member and a signed-out session; and it is one statement."""

from __future__ import annotations

import itertools
from dataclasses import asdict

import pytest
import sqlalchemy as sa

from desk.core.errors import NotFound
from desk.core.models import TaskKind
from desk.core.runtime import Runtime
from desk.helpdesk import notifications
from desk.ledger import lanes
from desk.people import sessions
from desk.reads import tasks as reads
from desk.reads import tick
from tests.counting import counting
from tests.desk.visibility import MISSING, PEOPLE
from tests.factories import World

WHO = (*PEOPLE, "removed")


async def _signed_in(rt: Runtime, world: World, who: str) -> tuple[int, str]:
    """(user, session secret); "removed": the staff member, whose membership then ends while
    the session lives on (the harder case: nothing but the membership says no)."""
    user = world.staff if who == "removed" else getattr(world, who)
    secret, _ = await sessions.open_session(rt, user)
    if who == "removed":
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text("DELETE FROM membership WHERE user_id = :u AND team_id = :t"),
                {"u": user, "t": world.team},
            )
    return user, secret


async def _old_list(
    rt: Runtime, user: int, team: int | None, newest: int, first: int, kind: TaskKind | None
) -> reads.TaskPage | None:
    if team is None:
        return None
    try:
        return await reads.list_tasks(rt.pg, user, team, first=first, newer_than=newest, kind=kind)
    except NotFound:
        return None


async def _notify(rt: Runtime, world: World, user: int, n: int) -> None:
    async with rt.engine.begin() as conn:
        for _ in range(n):
            await notifications.insert_many(
                conn,
                user_ids=[user],
                team_id=world.team,
                task_id=None,
                kind="REMINDER",
                text="Ping",
                link="/tickets",
            )


@pytest.mark.parametrize("who", WHO)
async def test_the_tick_reads_what_the_separate_reads_read(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int], who: str
) -> None:
    user, secret = await _signed_in(rt, world, who)
    await _notify(rt, world, user, 2)
    await lanes.pause(rt, lanes.LONG, None)  # WAITING exports and imports say "paused"
    ids = [*ledger.values(), MISSING, ledger[("EXPORT", "staff")]]  # a duplicate too
    ordered = sorted(ledger.values())
    now = rt.clock()
    for team_cookie in (world.team, None, world.other_team, MISSING):
        old = await reads.viewer(rt.pg, secret, now, teams=team_cookie is None, unread=True)
        assert old is not None
        for newest, first, kind in [
            (0, 8, None),
            (ordered[3], 2, None),
            (ordered[3], 50, None),
            (ordered[-1], 8, None),
            (0, 8, TaskKind.IMPORT),
        ]:
            ask = tick.ListAsk(team_cookie, newest, first, kind)
            got = await tick.tick(
                rt.pg, secret, now, ids, team_id=team_cookie, teams=team_cookie is None, listing=ask
            )
            assert got is not None
            assert got.session == old  # person, CSRF, teams (when read), unread count
            assert got.session.unread == 2
            expected = await reads.tasks(rt.pg, user, ids)
            assert {i: r.hit() for i, r in got.rows.items()} == expected, (who, team_cookie)
            for i, row in got.rows.items():
                task = expected[i].task
                assert task is not None and row.updated_at == task.updated_at
                state = {k: v for k, v in asdict(task).items() if k in tick.State.__slots__}
                assert asdict(row.state) == state
                assert row.paused_lanes == expected[i].paused_lanes
            # The list's team: the cookie's, else the first of the person's teams by name.
            team = team_cookie or (old.teams[0].team_id if old.teams else None)
            assert got.list_team == team
            assert got.listing == await _old_list(rt, user, team, newest, first, kind), (
                who,
                team_cookie,
                newest,
                first,
            )


@pytest.mark.parametrize("who", WHO)
async def test_what_each_role_gets(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int], who: str
) -> None:
    """The rules themselves, not only "the same as before": customers never see reminders,
    exports are their owner's only, a non-member and a removed member get nothing."""
    user, secret = await _signed_in(rt, world, who)
    ask = tick.ListAsk(world.team, 0, 50)
    got = await tick.tick(
        rt.pg, secret, rt.clock(), [*ledger.values()], team_id=world.team, listing=ask
    )
    assert got is not None
    kinds = {got.rows[i].state.kind for i in got.rows}
    owners = {got.rows[i].state.owner_id for i in got.rows if got.rows[i].state.kind == "EXPORT"}
    if who in ("outsider", "removed"):
        assert got.rows == {} and got.listing is None
        return
    assert owners == {user} or (who == "customer2" and owners == set())
    assert got.listing is not None
    assert {t.id for t in got.listing.items} == set(got.rows)  # the list shows what the rows do
    if who.startswith("customer"):
        assert "REMINDER" not in kinds and "IMPORT" not in kinds
    else:
        assert "REMINDER" in kinds


async def test_a_hidden_row_is_absent_exactly_as_a_missing_one(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int]
) -> None:
    _, secret = await _signed_in(rt, world, "customer")
    hidden = ledger[("EXPORT", "staff")]
    now = rt.clock()
    a = await tick.tick(rt.pg, secret, now, [hidden], team_id=world.team)
    b = await tick.tick(rt.pg, secret, now, [MISSING], team_id=world.team)
    assert a is not None and b is not None
    assert a.rows == b.rows == {} and a.session == b.session and a.listing is b.listing is None


async def test_signed_out_sessions_get_nothing(rt: Runtime, world: World) -> None:
    now = rt.clock()
    assert await tick.tick(rt.pg, "not-a-session", now, [1], team_id=None) is None
    assert await tick.tick(rt.pg, "", now, [1], team_id=None) is None
    secret, _ = await sessions.open_session(rt, world.staff)
    await sessions.revoke(rt, secret)
    assert await tick.tick(rt.pg, secret, now, [1], team_id=world.team) is None


async def test_no_rows_and_no_team(rt: Runtime, world: World) -> None:
    """A person in no team: no list team, no list; nothing watched: no rows."""
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("DELETE FROM membership WHERE user_id = :u"), {"u": world.staff})
    secret, _ = await sessions.open_session(rt, world.staff)
    ask = tick.ListAsk(None, 0, 8)
    got = await tick.tick(rt.pg, secret, rt.clock(), [], team_id=None, teams=True, listing=ask)
    assert got is not None and got.session.teams == [] and got.list_team is None
    assert got.rows == {} and got.listing is None


async def test_a_tick_is_one_statement(
    rt: Runtime, world: World, ledger: dict[tuple[str, str], int]
) -> None:
    secret, _ = await sessions.open_session(rt, world.staff)
    ask = tick.ListAsk(None, 0, 8)
    with counting(rt.pg) as seen:
        got = await tick.tick(
            rt.pg, secret, rt.clock(), [*ledger.values()], team_id=None, teams=True, listing=ask
        )
    assert got is not None and got.rows and got.listing is not None and got.listing.items
    assert seen[0] == "checkout" and len(seen) == 2, seen


def test_the_statement_stays_short_enough_for_psycopg_to_keep_its_parsing() -> None:
    """Above 4,096 bytes psycopg parses a statement's placeholders again on every execute."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    for teams, listing, kind in itertools.product((False, True), repeat=3):
        sql = tick._sql(teams, listing, kind and listing)
        assert len(sql.encode()) <= MAX_CACHED_STATEMENT_LENGTH, (teams, listing, kind)
