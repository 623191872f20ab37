"""Who is calling, on rt.pg: a session secret or an API token names its user in one statement;
unknown, revoked or expired ones name nobody; and the first lookup after every connection was
ended (a database restart) still answers."""

from __future__ import annotations

import psycopg

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import sessions, users


async def _end_every_connection(settings: Settings) -> None:
    """What a restarting server does to this test's database: every other session ends."""
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


async def test_a_live_session_names_its_user_an_ended_one_nobody(rt, world, clock) -> None:
    secret, _ = await sessions.open_session(rt, world.staff)
    found = await sessions.lookup(rt, secret)
    assert found is not None and found.user_id == world.staff
    assert await sessions.lookup(rt, secret + "x") is None
    clock.advance(sessions.SESSION_MAX_AGE + 1)
    assert await sessions.lookup(rt, secret) is None, "expired"
    other, _ = await sessions.open_session(rt, world.customer)
    await sessions.revoke(rt, other)
    assert await sessions.lookup(rt, other) is None, "revoked"


async def test_a_live_token_names_its_owner_a_revoked_one_nobody(rt, world) -> None:
    made, token = await users.create_token(rt, world.admin, "ci")
    assert await users.user_for_token(rt, token) == world.admin
    assert await users.user_for_token(rt, token + "x") is None
    assert await users.user_for_token(rt, "not-a-token") is None
    await users.revoke_token(rt, world.admin, made.id or 0)
    assert await users.user_for_token(rt, token) is None


async def test_a_token_use_is_stamped_at_most_once_a_minute(rt, world, clock) -> None:
    made, token = await users.create_token(rt, world.admin, "ci")

    async def stamped():
        row = await rt.pg.one("SELECT last_used_at FROM api_token WHERE id = %(i)s", {"i": made.id})
        return row["last_used_at"] if row else None

    await users.user_for_token(rt, token)
    first = await stamped()
    assert first == clock()
    clock.advance(30)
    await users.user_for_token(rt, token)
    assert await stamped() == first
    clock.advance(31)
    await users.user_for_token(rt, token)
    assert await stamped() == clock()


async def test_the_first_lookups_after_a_restart_still_answer(
    rt: Runtime, world, settings: Settings
) -> None:
    secret, _ = await sessions.open_session(rt, world.staff)
    _, token = await users.create_token(rt, world.admin, "ci")
    assert await sessions.lookup(rt, secret) is not None  # the pool holds live connections
    await _end_every_connection(settings)
    found = await sessions.lookup(rt, secret)
    assert found is not None and found.user_id == world.staff
    await _end_every_connection(settings)
    assert await users.user_for_token(rt, token) == world.admin
