"""Idempotency keys: one key is one request's task for a window, even after it finished; the same
key with another request is refused; concurrent requests with one key make one task."""

import asyncio

import pytest

from desk.core.errors import IdempotencyKeyReused, ValidationProblem
from desk.reads import tasks as reads
from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry

KEY = "3f0a7c2e-key-one"


async def test_same_key_after_the_task_finished_is_the_same_task(rt, world):
    first = await tasks.create_export(rt, world.staff, world.team, {}, idempotency_key=KEY)
    await execute(rt, registry(), first.id, first.run)
    assert (await tasks.get_task(rt, world.staff, first.id)).status == "COMPLETED"
    again = await tasks.create_export(rt, world.staff, world.team, {}, idempotency_key=KEY)
    assert again.id == first.id and again.status == "COMPLETED"
    page = await reads.list_tasks(rt.pg, world.staff, world.team)
    assert [t.id for t in page.items] == [first.id]
    # Without a key, a finished export's twin is a new export (no active one holds the scope).
    fresh = await tasks.create_export(rt, world.staff, world.team, {})
    assert fresh.id != first.id


async def test_same_key_with_other_filters_is_a_clear_error(rt, world):
    await tasks.create_export(rt, world.staff, world.team, {"q": "a"}, idempotency_key=KEY)
    with pytest.raises(IdempotencyKeyReused) as err:
        await tasks.create_export(rt, world.staff, world.team, {"q": "b"}, idempotency_key=KEY)
    assert err.value.field == "idempotency_key" and "different request" in err.value.message
    # A reused key is a conflict with an earlier request, not a malformed one (RFC 9110 409).
    assert err.value.http_status == 409


async def test_keys_belong_to_their_owner(rt, world):
    mine = await tasks.create_export(rt, world.staff, world.team, {}, idempotency_key=KEY)
    theirs = await tasks.create_export(rt, world.admin, world.team, {}, idempotency_key=KEY)
    assert mine.id != theirs.id and theirs.owner_id == world.admin


async def test_key_is_forgotten_after_the_window(rt, world, clock):
    first = await tasks.create_export(rt, world.staff, world.team, {}, idempotency_key=KEY)
    await tasks.cancel_task(rt, world.staff, first.id)
    clock.advance(rt.settings.idempotency_window_seconds + 1)
    later = await tasks.create_export(rt, world.staff, world.team, {"q": "x"}, idempotency_key=KEY)
    assert later.id != first.id
    assert (await tasks.get_task(rt, world.staff, first.id)).idempotency_key is None


async def test_concurrent_requests_with_one_key_make_one_task(rt, world):
    results = await asyncio.gather(
        *(
            tasks.create_export(rt, world.staff, world.team, {}, idempotency_key=KEY)
            for _ in range(10)
        )
    )
    assert len({t.id for t in results}) == 1


@pytest.mark.parametrize("key", ["short", "has spaces in it", "x" * 101, "ключ-ключ-ключ"])
async def test_malformed_keys_name_the_field(rt, world, key):
    with pytest.raises(ValidationProblem) as err:
        await tasks.create_export(rt, world.staff, world.team, {}, idempotency_key=key)
    assert err.value.field == "idempotency_key"


async def test_reminder_retry_with_its_key_is_the_same_reminder(rt, world, clock):
    ticket = world.tickets["login"]
    first = await reminders.schedule_reminder(
        rt, world.staff, ticket, in_minutes=30, idempotency_key=KEY
    )
    clock.advance(90)  # "in 30 minutes" now means another minute: still the same request
    again = await reminders.schedule_reminder(
        rt, world.staff, ticket, in_minutes=30, idempotency_key=KEY
    )
    assert again.id == first.id and again.status == "WAITING"
    with pytest.raises(IdempotencyKeyReused):
        await reminders.schedule_reminder(
            rt, world.staff, ticket, in_minutes=45, idempotency_key=KEY
        )
