"""Fair sends (desk/ledger/sends.py, docs/architecture.md "Fair sends"): at most `mail_max` of a
team's due e-mails are in Redis at a time; the others wait unsent in the ledger and go out,
oldest first, as those are taken. Other teams' work and e-mails of no team (a password reset)
are never held back by it, and a lost send is sent again however full its team's window is."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.ledger import mail as ledger_mail
from desk.ledger import sends as ledger_sends
from tests.factories import World

WINDOW = 5
LOOKAHEAD = timedelta(hours=1)
REDELIVERY = timedelta(seconds=15)


async def _mails(rt: Runtime, team: int | None, n: int, tag: str) -> list[int]:
    ids = []
    for i in range(n):
        task = await ledger_mail.accept_email(
            rt.pg, team_id=team, owner_id=None, scope_key=f"mail:{tag}:{i}",
            filters={"to": f"{tag}{i}@x.test"}, max_attempts=5, now=rt.clock(),
        )  # fmt: skip
        assert task.id is not None
        ids.append(task.id)
    return ids


async def _claim(rt: Runtime) -> set[int]:
    due = await ledger_sends.claim_due(
        rt.pg, now=rt.clock(), lookahead=LOOKAHEAD, redelivery=REDELIVERY, limit=1000,
        team_max=2, mail_max=WINDOW,
    )  # fmt: skip
    return {d.task_id for d in due}


async def _take(rt: Runtime, ids: list[int]) -> None:
    """What a worker's claim does to a sent task, as far as the window is concerned."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET status = 'RUNNING' WHERE id = ANY(:ids)"),
            {"ids": ids},
        )


async def test_a_teams_mail_storm_fills_only_its_window(rt: Runtime, world: World, clock) -> None:
    storm = await _mails(rt, world.team, 40, "a")
    other = await _mails(rt, world.other_team, 3, "b")
    reset = await _mails(rt, None, 1, "reset")
    sent = await _claim(rt)
    assert sent & set(storm) == set(storm[:WINDOW]), "the storm's oldest, as many as the window"
    assert set(other) <= sent and set(reset) <= sent
    assert await _claim(rt) == set(), "the window is full: nothing more of the storm"

    await _take(rt, storm[:2])  # two of them taken by workers: room for two more
    assert await _claim(rt) == set(storm[WINDOW : WINDOW + 2])


async def test_a_kick_sends_a_teams_mail_only_while_its_window_has_room(
    rt: Runtime, world: World, clock
) -> None:
    storm = await _mails(rt, world.team, WINDOW + 1, "a")
    other = await _mails(rt, world.other_team, 1, "b")

    async def kick(task_id: int) -> ledger_sends.Due | None:
        async with rt.engine.begin() as conn:
            return await ledger_sends.reserve_send(
                conn, task_id, 1, now=rt.clock(), team_max=2, mail_max=WINDOW
            )

    for task_id in storm[:WINDOW]:
        assert await kick(task_id) is not None
    assert await kick(storm[WINDOW]) is None, "full: the dispatcher sends it when there is room"
    assert await kick(other[0]) is not None, "another team's e-mail is not held back"
    await _take(rt, storm[:1])
    assert await kick(storm[WINDOW]) is not None


async def test_lost_sends_of_a_full_window_are_sent_again(rt: Runtime, world: World, clock) -> None:
    storm = await _mails(rt, world.team, WINDOW + 3, "a")
    assert await _claim(rt) == set(storm[:WINDOW])
    clock.now += REDELIVERY + timedelta(seconds=1)  # Redis lost them: never claimed
    assert await _claim(rt) == set(storm[:WINDOW]), "the same ones again, not newer ones"


async def test_without_a_window_nothing_is_held_back(rt: Runtime, world: World) -> None:
    storm = await _mails(rt, world.team, 30, "a")
    due = await ledger_sends.claim_due(
        rt.pg, now=rt.clock(), lookahead=LOOKAHEAD, redelivery=REDELIVERY, limit=1000, team_max=2
    )
    assert {d.task_id for d in due} == set(storm)
