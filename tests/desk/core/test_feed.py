"""The change feed (desk/core/feed.py, migration 0011): real NOTIFY from real commits, one
listening connection, bounded fan-out, and a re-read signal whenever notices may be lost."""

from __future__ import annotations

import asyncio

import psycopg
import sqlalchemy as sa

from desk.core.feed import Event, Feed, LanesNote, Resync, Subscription, TaskNote, UserNote, parse
from desk.core.runtime import Runtime
from desk.work import tasks
from tests.factories import World

DEADLINE = 30.0


async def _next(sub: Subscription, want: type[Event] = TaskNote) -> Event:
    async def first() -> Event:
        async for e in sub:
            if isinstance(e, want):
                return e
        raise AssertionError("the subscription ended")

    return await asyncio.wait_for(first(), DEADLINE)


async def _finished_noops(rt: Runtime, world: World, n: int, prefix: str) -> None:
    """`n` finished NOOP tasks of the team, in one statement."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO background_task (kind, team_id, owner_id, scope_key, status) "
                "SELECT 'NOOP', :t, :u, :p || g, 'COMPLETED' FROM generate_series(1, :n) g"
            ),
            {"t": world.team, "u": world.staff, "p": prefix, "n": n},
        )


async def _listening(rt: Runtime) -> Feed:
    feed = rt.listen()
    assert await feed.wait_connected(DEADLINE)
    return feed


async def test_a_created_task_and_its_changes_are_announced_with_their_versions(
    rt: Runtime, world: World
) -> None:
    feed = await _listening(rt)
    async with feed.subscribe(teams=[world.team]) as sub:
        task = await tasks.create_export(rt, world.staff, world.team, {})
        note = await _next(sub)
        assert isinstance(note, TaskNote)
        assert (note.id, note.team_id, note.owner_id, note.kind) == (
            task.id,
            world.team,
            world.staff,
            "EXPORT",
        )
        assert note.created and note.status == "WAITING"
        assert note.updated_at == task.updated_at
        cancelled = await tasks.cancel_task(rt, world.staff, task.id)
        note = await _next(sub)
        assert isinstance(note, TaskNote)
        assert not note.created and note.status == "CANCELLED"
        assert note.updated_at == cancelled.updated_at


async def test_a_batch_statement_is_one_notice_and_a_huge_one_stays_under_the_limit(
    rt: Runtime, world: World
) -> None:
    feed = await _listening(rt)
    before = feed.notices
    async with feed.subscribe(teams=[world.team], size=5000) as sub:
        await _finished_noops(rt, world, 40, "n")
        seen = {(await _next(sub)).id for _ in range(40)}  # type: ignore[union-attr]
        assert len(seen) == 40
        assert feed.notices == before + 1
        await _finished_noops(rt, world, 1000, "m")
        seen = {(await _next(sub)).id for _ in range(1000)}  # type: ignore[union-attr]
        assert len(seen) == 1000
        # Split only where the payload limit says: about 90 rows a notice.
        assert before + 1 + 5 <= feed.notices <= before + 1 + 30


async def test_people_sessions_memberships_and_lanes_are_announced(
    rt: Runtime, world: World
) -> None:
    feed = await _listening(rt)
    async with feed.subscribe(users=[world.customer], everything=False) as sub:
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text(
                    "INSERT INTO notification (user_id, team_id, kind, text) "
                    "VALUES (:u, :t, 'X', 'hello')"
                ),
                {"u": world.customer, "t": world.team},
            )
        assert await _next(sub, UserNote) == UserNote(world.customer, "notification")
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text("DELETE FROM membership WHERE user_id = :u"), {"u": world.customer}
            )
        assert await _next(sub, UserNote) == UserNote(world.customer, "membership", world.team)
    async with feed.subscribe(everything=True) as sub:
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text("INSERT INTO task_lane (name, paused) VALUES ('long', true)")
            )
        assert isinstance(await _next(sub, LanesNote), LanesNote)


async def test_a_killed_listener_reconnects_and_tells_every_subscriber_to_read_again(
    rt: Runtime, world: World
) -> None:
    feed = await _listening(rt)
    generation = feed.generation
    async with feed.subscribe(tasks=[12345]) as sub:
        pid = feed.backend_pid
        assert pid is not None
        async with await psycopg.AsyncConnection.connect(
            rt.settings.libpq_url, autocommit=True
        ) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        resync = await _next(sub, Resync)
        assert isinstance(resync, Resync) and resync.reason == "reconnected"
        assert feed.connected and feed.generation == generation + 1
        # ... and listens again: a change after the reconnect arrives.
        task = await tasks.create_export(rt, world.staff, world.team, {})
    # The creation's own notice is told before the subscription below, which then hears only
    # the cancel (it could otherwise be the first note it gets).
    assert await feed.sync()
    async with feed.subscribe(tasks=[task.id]) as sub:
        await tasks.cancel_task(rt, world.staff, task.id)
        note = await _next(sub)
        assert isinstance(note, TaskNote) and note.status == "CANCELLED"


async def test_a_subscriber_that_falls_behind_is_told_to_read_again_not_left_blocking(
    rt: Runtime, world: World
) -> None:
    feed = await _listening(rt)
    async with feed.subscribe(teams=[world.team], size=3) as slow:
        await _finished_noops(rt, world, 10, "o")
        assert isinstance(await _next(slow, Resync), Resync)
        assert slow.overflows >= 1


def test_an_unknown_notice_is_ignored_and_a_deleted_task_is_gone() -> None:
    assert parse("z:1;2") == []
    (gone,) = parse("d:7")
    assert isinstance(gone, TaskNote) and gone.gone and gone.id == 7
