"""Accepting work: membership, validation, quotas, idempotency, customer scope, visibility."""

import asyncio
from datetime import timedelta

import pytest

from desk.core.errors import NotFound, QuotaExceeded, TaskConflict, ValidationProblem
from desk.reads import tasks as reads
from desk.work import tasks


async def test_non_member_is_told_the_team_does_not_exist(rt, world):
    with pytest.raises(NotFound):
        await tasks.create_export(rt, world.outsider, world.team, {})
    with pytest.raises(NotFound):
        await tasks.create_export(rt, world.staff, 999_999, {})


@pytest.mark.parametrize(
    "filters,field",
    [
        ({"status": ["OPEN", "NOPE"]}, "status"),
        ({"priority": "urgentish"}, "priority"),
        ({"assignment": "everyone"}, "assignment"),
        ({"assignment": "user"}, "assignee_id"),
        ({"colour": "red"}, "colour"),
        ({"q": "x" * 201}, "q"),
    ],
)
async def test_bad_filters_name_the_field_and_write_nothing(rt, world, filters, field):
    with pytest.raises(ValidationProblem) as err:
        await tasks.create_export(rt, world.staff, world.team, filters)
    assert err.value.field == field
    page = await reads.list_tasks(rt.pg, world.staff, world.team)
    assert page.items == []


async def test_assignment_user_must_be_staff_of_the_team(rt, world):
    with pytest.raises(ValidationProblem):
        await tasks.create_export(
            rt, world.staff, world.team, {"assignment": "user", "assignee_id": world.outsider}
        )
    task = await tasks.create_export(
        rt, world.staff, world.team, {"assignment": "user", "assignee_id": world.staff}
    )
    assert task.filters == {"assignment": "user", "assignee_id": world.staff}


async def test_same_normalised_filters_conflict_with_the_active_task(rt, world):
    first = await tasks.create_export(
        rt, world.staff, world.team, {"status": ["pending", "OPEN"], "q": " log  in "}
    )
    with pytest.raises(TaskConflict) as err:
        await tasks.create_export(
            rt, world.staff, world.team, {"status": "OPEN,PENDING", "q": "log in"}
        )
    assert err.value.existing.id == first.id
    other_user = await tasks.create_export(
        rt, world.admin, world.team, {"status": ["OPEN", "PENDING"], "q": "log in"}
    )
    assert other_user.id != first.id


async def test_fifty_concurrent_identical_exports_make_one_task(rt, world):
    results = await asyncio.gather(
        *(
            tasks.create_export(rt, world.staff, world.team, {"priority": ["URGENT"]})
            for _ in range(50)
        ),
        return_exceptions=True,
    )
    created = [r for r in results if not isinstance(r, BaseException)]
    conflicts = [r for r in results if isinstance(r, TaskConflict)]
    assert len(created) == 1 and len(conflicts) == 49, [type(r) for r in results]
    assert {c.existing.id for c in conflicts} == {created[0].id}


async def test_quota_active_exports_per_user(rt, world):
    for i in range(3):
        await tasks.create_export(rt, world.staff, world.team, {"q": f"n{i}"})
    with pytest.raises(QuotaExceeded) as err:
        await tasks.create_export(rt, world.staff, world.team, {"q": "n4"})
    assert err.value.retry_after > rt.clock()
    await tasks.create_export(rt, world.admin, world.team, {"q": "n4"})  # per user


async def test_quota_per_hour_says_when_to_try_again(rt, world, clock):
    start = clock()
    for i in range(20):
        t = await tasks.create_export(rt, world.staff, world.team, {"q": f"h{i}"})
        await tasks.cancel_task(rt, world.staff, t.id)
        clock.advance(60)
    with pytest.raises(QuotaExceeded) as err:
        await tasks.create_export(rt, world.staff, world.team, {"q": "one more"})
    assert err.value.retry_after == start + timedelta(hours=1)
    clock.now = start + timedelta(hours=1, seconds=1)
    await tasks.create_export(rt, world.staff, world.team, {"q": "one more"})


async def test_customer_export_is_scoped_to_their_own_tickets(rt, world):
    task = await tasks.create_export(rt, world.customer, world.team, {})
    assert task.scope_creator_id == world.customer
    staff_task = await tasks.create_export(rt, world.staff, world.team, {})
    assert staff_task.scope_creator_id is None


async def test_visibility_of_exports_and_reminders(rt, world):
    export = await tasks.create_export(rt, world.customer, world.team, {})
    assert (await tasks.get_task(rt, world.customer, export.id)).id == export.id
    for other in (world.customer2, world.staff, world.admin, world.outsider):
        with pytest.raises(NotFound):
            await tasks.get_task(rt, other, export.id)
    from desk.work import reminders

    reminder = await reminders.schedule_reminder(
        rt, world.staff, world.tickets["login"], in_minutes=5
    )
    for allowed in (world.staff, world.admin):
        assert (await tasks.get_task(rt, allowed, reminder.id)).kind == "REMINDER"
    for refused in (world.customer, world.outsider):
        with pytest.raises(NotFound):
            await tasks.get_task(rt, refused, reminder.id)
    staff_list = {t.id for t in (await reads.list_tasks(rt.pg, world.staff, world.team)).items}
    assert staff_list == {reminder.id}
    customer_list = {
        t.id for t in (await reads.list_tasks(rt.pg, world.customer, world.team)).items
    }
    assert customer_list == {export.id}
    with pytest.raises(NotFound):
        await reads.list_tasks(rt.pg, world.outsider, world.team)


async def test_list_is_newest_first_with_cursor_and_newer_than(rt, world):
    made = [await tasks.submit_noop(rt, world.staff, world.team) for _ in range(5)]
    page = await reads.list_tasks(rt.pg, world.staff, world.team, first=2)
    assert [t.id for t in page.items] == [made[4].id, made[3].id] and page.has_next
    page2 = await reads.list_tasks(rt.pg, world.staff, world.team, first=2, after=page.end_cursor)
    assert [t.id for t in page2.items] == [made[2].id, made[1].id]
    newer = await reads.list_tasks(rt.pg, world.staff, world.team, newer_than=made[3].id)
    assert [t.id for t in newer.items] == [made[4].id]


async def test_cancel_and_retry_rules(rt, world):
    export = await tasks.create_export(rt, world.customer, world.team, {})
    with pytest.raises(NotFound):
        await tasks.cancel_task(rt, world.customer2, export.id)
    cancelled = await tasks.cancel_task(rt, world.customer, export.id)
    assert cancelled.status == "CANCELLED"
    with pytest.raises(ValidationProblem):
        await tasks.retry_task(rt, world.customer, export.id)


async def test_status_labels(rt, world, clock):
    t = await tasks.submit_noop(rt, world.staff, world.team)
    assert tasks.status_label(t, clock()) == "Queued"
    later = await tasks.submit_noop(
        rt, world.staff, world.team, run_at=clock() + timedelta(minutes=5)
    )
    assert tasks.status_label(later, clock()) == "Scheduled"
    t.attempts = 1
    assert tasks.status_label(t, clock()) == "Retrying"


async def test_team_members_shows_customers_only_staff_and_themselves(rt, world):
    from desk.helpdesk import tickets

    staff_view = {
        uid: (email, role)
        for uid, _n, email, role in await tickets.team_members(rt, world.staff, world.team)
    }
    assert set(staff_view) == {world.admin, world.staff, world.customer, world.customer2}
    customer_view = {
        uid: (email, role)
        for uid, _n, email, role in await tickets.team_members(rt, world.customer, world.team)
    }
    assert set(customer_view) == {world.admin, world.staff, world.customer}
    assert (
        customer_view[world.customer][0] == "lin@acme.test" and customer_view[world.staff][0] == ""
    )
    with pytest.raises(NotFound):
        await tickets.team_members(rt, world.outsider, world.team)
