"""A ticket's SLA timers on the ledger (docs/architecture.md, "Business hours"): planned in the
transaction of each change with the right instants, superseded by a reply or a priority change,
none for a team without a policy (and no statement more on its posts), a DST week and a
holiday through the whole replan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.helpdesk import sla_store, tickets
from desk.work import conversation
from tests.counting import counting
from tests.factories import World
from tests.helpers import run_task

ALWAYS = {"zone": "UTC", "hours": {d: ["00:00-24:00"] for d in
          ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}}  # fmt: skip
TARGETS = {
    "first_response": {"URGENT": 3600, "NORMAL": 14400},
    "resolution": {"URGENT": 86400, "NORMAL": 432000},
}


async def policy(rt: Runtime, world: World, calendar: Any = None, **targets: Any) -> None:
    await sla_store.set_team_policy(
        rt, world.admin, world.team, calendar=calendar or ALWAYS,
        targets=targets or TARGETS, warn_share=0.75,
    )  # fmt: skip


async def timers(rt: Runtime, ticket: int, status: str = "WAITING") -> list[Any]:
    async with rt.engine.connect() as conn:
        found = await conn.execute(
            sa.text(
                "SELECT scope_key, run_at, filters, status, result_skipped, summary_key "
                "FROM background_task WHERE kind = 'SLA_TIMER' AND ticket_id = :t "
                "AND status = :s ORDER BY run_at, scope_key"
            ),
            {"t": ticket, "s": status},
        )
        return list(found.all())


async def test_a_new_ticket_queues_its_warnings_and_breaches(rt: Runtime, world: World) -> None:
    await policy(rt, world)
    now = rt.clock()
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "help", "URGENT")
    t = made.id or 0
    assert made.sla_due_at == now + timedelta(hours=1)
    planned = [(r.scope_key, r.run_at) for r in await timers(rt, t)]
    assert planned == [
        (f"sla:{t}:first_response:warning:0", now + timedelta(minutes=45)),
        (f"sla:{t}:first_response:breach:0", now + timedelta(hours=1)),
        (f"sla:{t}:resolution:warning:0", now + timedelta(hours=18)),
        (f"sla:{t}:resolution:breach:0", now + timedelta(hours=24)),
    ]


async def test_a_staff_reply_supersedes_the_first_response_timers(
    rt: Runtime, world: World
) -> None:
    await policy(rt, world)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "help", "URGENT")
    t = made.id or 0
    rt.clock.advance(600)  # type: ignore[attr-defined]
    posted = await conversation.post_message(rt, world.staff, t, "On it.")
    left = [r.scope_key for r in await timers(rt, t)]
    assert left == [f"sla:{t}:resolution:warning:1", f"sla:{t}:resolution:breach:1"]
    ended = await timers(rt, t, "COMPLETED")
    assert len(ended) == 4 and all(r.result_skipped for r in ended)
    assert {r.summary_key for r in ended} == {"sla_timer.skipped.superseded"}
    assert posted.ticket.sla_due_at == made.created_at + timedelta(hours=24)


async def test_a_priority_change_plans_again(rt: Runtime, world: World) -> None:
    await policy(rt, world)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Slow", "x", "NORMAL")
    t = made.id or 0
    changed = await tickets.update_ticket(rt, world.staff, t, priority="URGENT")
    assert changed.sla_due_at == made.created_at + timedelta(hours=1)
    runs = [r.run_at - made.created_at for r in await timers(rt, t)]
    assert runs == [timedelta(minutes=45), timedelta(hours=1), timedelta(hours=18),
                    timedelta(hours=24)]  # fmt: skip
    assert all(r.filters["revision"] == 1 for r in await timers(rt, t))


async def test_a_team_without_policy_plans_nothing_and_posts_cost_nothing_more(
    rt: Runtime, world: World
) -> None:
    made = await tickets.create_ticket(rt, world.customer, world.team, "Hi", "x", "URGENT")
    t = made.id or 0
    assert made.sla_due_at is None and await timers(rt, t) == []
    with counting(rt.pg) as seen:
        await conversation.post_message(rt, world.staff, t, "Hello")
    without = len(seen)
    await policy(rt, world)
    made2 = await tickets.create_ticket(rt, world.customer, world.team, "Hi", "x", "URGENT")
    with counting(rt.pg) as seen:
        await conversation.post_message(rt, world.staff, made2.id or 0, "Hello")
    assert len(seen) > without  # the same post plans the clocks where there is a policy
    await sla_store.clear_team_policy(rt, world.admin, world.team)
    made3 = await tickets.create_ticket(rt, world.customer, world.team, "Hi", "x", "URGENT")
    with counting(rt.pg) as seen:
        await conversation.post_message(rt, world.staff, made3.id or 0, "Hello")
    assert len(seen) == without


async def test_pending_pauses_the_clock_and_reopening_plans_it_again(
    rt: Runtime, world: World
) -> None:
    await policy(rt, world)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    t = made.id or 0
    rt.clock.advance(600)  # type: ignore[attr-defined]
    paused = await conversation.post_message(rt, world.staff, t, "Which one?",
                                             set_status="PENDING")  # fmt: skip
    assert paused.ticket.sla_due_at is None and await timers(rt, t) == []
    rt.clock.advance(3000)  # type: ignore[attr-defined]  # 50 minutes pending in all
    back = await conversation.post_message(rt, world.customer, t, "The big one.")
    assert back.ticket.status == "OPEN"
    due = made.created_at + timedelta(hours=24, minutes=50)
    assert back.ticket.sla_due_at == due
    runs = [(r.scope_key.split(":")[2:4], r.run_at) for r in await timers(rt, t)]
    assert runs == [(["resolution", "warning"], made.created_at + timedelta(hours=18, minutes=50)),
                    (["resolution", "breach"], due)]  # fmt: skip
    # A status change alone (no post) replans too: resolved, nothing is left waiting.
    await tickets.update_ticket(rt, world.staff, t, status="RESOLVED")
    assert await timers(rt, t) == []


async def test_a_dst_week_and_a_holiday_through_the_replan(rt: Runtime, world: World) -> None:
    """Berlin, weekdays 09:00-17:00; clocks go back on Sunday 25 Oct 2026, Monday 26 is a
    holiday. Opened Friday 16:00 CEST with 4 business hours: 1 h on Friday, the rest from
    Tuesday 09:00 CET (08:00 UTC, no longer 07:00)."""
    week = {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
    berlin = {"zone": "Europe/Berlin", "hours": week, "holidays": ["2026-10-26"]}
    rt.clock.now = datetime(2026, 10, 23, 14, 0, tzinfo=UTC)  # type: ignore[attr-defined]
    await policy(rt, world, berlin, first_response={"URGENT": 4 * 3600})
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    t = made.id or 0
    due = datetime(2026, 10, 27, 11, 0, tzinfo=UTC)  # Tuesday 12:00 CET
    assert made.sla_due_at == due
    runs = [(r.scope_key.split(":")[3], r.run_at) for r in await timers(rt, t)]
    assert runs == [("warning", datetime(2026, 10, 27, 10, 0, tzinfo=UTC)), ("breach", due)]
    # Pending from Friday 16:30 CEST (30 minutes used) to Tuesday 10:00 CET: 3.5 hours left.
    rt.clock.now = datetime(2026, 10, 23, 14, 30, tzinfo=UTC)  # type: ignore[attr-defined]
    await tickets.update_ticket(rt, world.staff, t, status="PENDING")
    assert await timers(rt, t) == []
    rt.clock.now = datetime(2026, 10, 27, 9, 0, tzinfo=UTC)  # type: ignore[attr-defined]
    reopened = await tickets.update_ticket(rt, world.staff, t, status="OPEN")
    assert reopened.sla_due_at == datetime(2026, 10, 27, 12, 30, tzinfo=UTC)  # 13:30 CET


async def test_a_policy_saved_over_an_old_ticket_records_its_breach_and_announces_none(
    rt: Runtime, world: World
) -> None:
    """A team that starts an SLA over its backlog hears nothing of breaches due before it."""
    rt.clock.now = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)  # type: ignore[attr-defined]
    made = await tickets.create_ticket(rt, world.customer, world.team, "Old", "x", "URGENT")
    t = made.id or 0
    rt.clock.now = datetime(2026, 10, 5, 9, 0, tzinfo=UTC)  # type: ignore[attr-defined]
    await policy(rt, world)  # urgent: first response within 1 h, resolution within a day
    async with rt.engine.connect() as conn:
        [(run,)] = (
            await conn.execute(
                sa.text(
                    "SELECT id FROM background_task WHERE kind = 'SLA_TIMER' "
                    "AND scope_key LIKE 'sla-team:%' AND status = 'WAITING'"
                )
            )
        ).all()
    await run_task(rt, run)
    assert await timers(rt, t) == []
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text("SELECT sla_due_at, sla_breached_at FROM ticket WHERE id = :t"), {"t": t}
            )
        ).one()
    assert row.sla_due_at is None
    assert row.sla_breached_at == made.created_at + timedelta(hours=1)
