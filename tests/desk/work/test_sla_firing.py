"""SLA timers at fire time (docs/architecture.md, "Business hours"): a warning then a breach
fire once each (alert, breach instant, in-app notification, e-mail per preference), a resolved
ticket's timer skips, a policy change plans the team's open tickets again in bounded runs, and a
real worker process fires a breach on its own."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.helpdesk import sla_store, tickets
from desk.people import preferences
from desk.work import conversation, sla_replans
from tests.desk.work.test_sla_timers import ALWAYS, policy, timers
from tests.factories import World
from tests.helpers import run_task, running_workers, wait_for


async def _q(rt: Runtime, sql: str, **params: Any) -> list[Any]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql), params)).all())


async def _task(rt: Runtime, ticket: int, key_part: str) -> Any:
    [row] = [r for r in await timers(rt, ticket) if key_part in r.scope_key]
    [(task_id,)] = await _q(rt, "SELECT id FROM background_task WHERE scope_key = :k "
                            "AND status = 'WAITING'", k=row.scope_key)  # fmt: skip
    return task_id


async def _ended(rt: Runtime, task_id: int) -> Any:
    [row] = await _q(rt, "SELECT status, result_skipped, summary_key, summary_params "
                     "FROM background_task WHERE id = :i", i=task_id)  # fmt: skip
    return row


async def test_warning_then_breach_fire_once_each(rt: Runtime, world: World) -> None:
    await policy(rt, world)
    await preferences.set_mine(rt, world.staff, sla_email=True)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    t = made.id or 0
    await tickets.update_ticket(rt, world.admin, t, assignee_id=world.staff)
    warn = await _task(rt, t, "first_response:warning")
    breach = await _task(rt, t, "first_response:breach")
    rt.clock.advance(45 * 60)  # type: ignore[attr-defined]
    await run_task(rt, warn)
    ended = await _ended(rt, warn)
    assert (ended.status, ended.result_skipped, ended.summary_key) == (
        "COMPLETED",
        False,
        "sla_timer.warned",
    )
    assert ended.summary_params["count"] == 1
    rt.clock.advance(15 * 60)  # type: ignore[attr-defined]
    await run_task(rt, breach)
    assert (await _ended(rt, breach)).summary_key == "sla_timer.breached"
    alerts = await _q(rt, "SELECT target, kind, due_at FROM ticket_clock_alert "
                      "WHERE ticket_id = :t ORDER BY id", t=t)  # fmt: skip
    due = made.created_at + timedelta(hours=1)
    assert [tuple(a) for a in alerts] == [("first_response", "warning", due),
                                          ("first_response", "breach", due)]  # fmt: skip
    [(breached_at,)] = await _q(rt, "SELECT sla_breached_at FROM ticket WHERE id = :t", t=t)
    assert breached_at == due
    notes = await _q(rt, "SELECT user_id, kind, text_key FROM notification "
                     "WHERE kind LIKE 'SLA%' ORDER BY id")  # fmt: skip
    assert [tuple(n) for n in notes] == [(world.staff, "SLA_WARNING", "sla.warning"),
                                         (world.staff, "SLA_BREACH", "sla.breach")]  # fmt: skip
    mails = await _q(rt, "SELECT filters->>'template' AS tpl FROM background_task "
                     "WHERE kind = 'EMAIL' AND filters->>'template' = 'sla_alert'")  # fmt: skip
    assert len(mails) == 2
    # A customer's second message moves the revision, not the due time: nothing fires again.
    await tickets.update_ticket(rt, world.staff, t, priority="URGENT")
    before = len(await _q(rt, "SELECT id FROM ticket_clock_alert"))
    await conversation.post_message(rt, world.customer, t, "Anyone?")
    again = [r.scope_key for r in await timers(rt, t) if "first_response" in r.scope_key]
    assert again == []  # the fired breach is not planned again
    assert len(await _q(rt, "SELECT id FROM ticket_clock_alert")) == before


async def test_unassigned_warns_the_team_staff(rt: Runtime, world: World) -> None:
    await policy(rt, world)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    warn = await _task(rt, made.id or 0, "first_response:warning")
    await run_task(rt, warn)
    notified = await _q(rt, "SELECT user_id FROM notification WHERE kind = 'SLA_WARNING' "
                        "ORDER BY user_id")  # fmt: skip
    assert [n.user_id for n in notified] == sorted([world.admin, world.staff])


async def test_a_resolved_ticket_skips_its_timer(rt: Runtime, world: World) -> None:
    await policy(rt, world)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    t = made.id or 0
    breach = await _task(rt, t, "resolution:breach")
    async with rt.engine.begin() as conn:  # resolved behind the replan's back
        await conn.execute(sa.text("UPDATE ticket SET status = 'RESOLVED' WHERE id = :t"), {"t": t})
    await run_task(rt, breach)
    ended = await _ended(rt, breach)
    assert (ended.result_skipped, ended.summary_key) == (True, "sla_timer.skipped.closed")
    assert await _q(rt, "SELECT id FROM ticket_clock_alert") == []


async def test_a_policy_change_plans_the_open_tickets_again(rt: Runtime, world: World) -> None:
    await policy(rt, world)
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    t = made.id or 0
    old = await _task(rt, t, "first_response:breach")
    stricter = {"first_response": {"URGENT": 1800}}
    await sla_store.set_team_policy(rt, world.admin, world.team, calendar=ALWAYS,
                                    targets=stricter)  # fmt: skip
    [run] = await _q(rt, "SELECT id FROM background_task WHERE kind = 'SLA_TIMER' "
                     "AND scope_key LIKE 'sla-team:%' AND status = 'WAITING'")  # fmt: skip
    await run_task(rt, run.id)
    ended = await _ended(rt, old)
    assert (ended.result_skipped, ended.summary_key) == (True, "sla_timer.skipped.policy")
    runs = [r.run_at - made.created_at for r in await timers(rt, t)]
    assert runs == [timedelta(minutes=22, seconds=30), timedelta(minutes=30)]
    done = await _ended(rt, run.id)
    # Its ticket and the world's three other open ones; the resolved one is left alone.
    assert (done.summary_key, done.summary_params["count"]) == ("sla_timer.replanned", 4)


async def test_a_team_replan_runs_in_bounded_chained_tasks(
    rt: Runtime, world: World, monkeypatch: Any
) -> None:
    await policy(rt, world)
    for i in range(5):
        await tickets.create_ticket(rt, world.customer, world.team, f"T{i}", "x", "URGENT")
    monkeypatch.setattr(sla_replans, "BATCH", 2)
    monkeypatch.setattr(sla_replans, "PER_RUN", 2)
    await sla_store.set_team_policy(rt, world.admin, world.team, calendar=ALWAYS,
                                    targets={"resolution": {"URGENT": 7200}})  # fmt: skip
    chain = []
    while True:
        found = await _q(rt, "SELECT id FROM background_task WHERE scope_key LIKE 'sla-team:%' "
                         "AND status = 'WAITING'")  # fmt: skip
        if not found:
            break
        chain.append(found[0].id)
        await run_task(rt, found[0].id)
        assert len(chain) < 10
    assert len(chain) >= 3  # 5 open tickets (and the world's), two per run
    left = await _q(rt, "SELECT scope_key FROM background_task WHERE kind = 'SLA_TIMER' "
                    "AND status = 'WAITING' AND scope_key LIKE '%first_response%'")  # fmt: skip
    assert left == []


@pytest.mark.slow  # starts a real worker process
async def test_a_real_worker_fires_a_breach_on_time(
    rt: Runtime, world: World, tmp_path: Any, settings: Any
) -> None:
    """A one-minute target on a ticket opened 59 s ago: the worker's own dispatcher and
    processor fire its warning at once and its breach a second later, once each."""
    opened = utcnow() - timedelta(seconds=59)
    rt.clock = lambda: opened  # type: ignore[assignment]
    await policy(rt, world, first_response={"URGENT": 60})
    made = await tickets.create_ticket(rt, world.customer, world.team, "Down", "x", "URGENT")
    t = made.id or 0
    rt.clock = utcnow  # type: ignore[assignment]
    breach = await _task(rt, t, "first_response:breach")
    with running_workers(settings, tmp_path):

        async def fired() -> Any:
            row = await _ended(rt, breach)
            return row if row.status == "COMPLETED" else None

        ended = await wait_for(fired, timeout=30, what="the breach fired")
    assert ended.summary_key == "sla_timer.breached"
    [(late,)] = await _q(rt, "SELECT extract(epoch FROM finished_at - run_at) FROM "
                         "background_task WHERE id = :i", i=breach)  # fmt: skip
    assert late < 10  # to the second on an idle machine; bounded here for shared CI
    alerts = await _q(rt, "SELECT kind FROM ticket_clock_alert WHERE ticket_id = :t "
                      "ORDER BY id", t=t)  # fmt: skip
    assert [a.kind for a in alerts] == ["warning", "breach"]
    [(breached_at,)] = await _q(rt, "SELECT sla_breached_at FROM ticket WHERE id = :t", t=t)
    assert breached_at == made.created_at + timedelta(seconds=60)
