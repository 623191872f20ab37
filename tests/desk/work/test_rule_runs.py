"""A team's time rules on the ledger (docs/architecture.md, "Time rules on the ledger"): a
resolved ticket closes once after N days whatever runs, duplicates and rescues do; a reply in
between supersedes the plan; pending → remind (a mailed public message) → resolve; each run
lists the tickets it touched and queues the next at the team's next due instant; only staff
read and only admins save the rules, and a customer or stranger is told the team is not there."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from desk.core.errors import NotAllowed, NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.helpdesk import time_rules
from desk.helpdesk.time_rules import Rules
from desk.ledger.sql import rows
from desk.work import conversation, rule_runs, rule_sql
from jobs import scheduler
from tests.factories import World
from tests.helpers import run_task

DAY = 86_400


async def _q(rt: Runtime, sql: str, **params: Any) -> list[Any]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql), params)).all())


async def _since(rt: Runtime, ticket: int, days: float, status: str | None = None) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET status_since = :at, status = coalesce(:s, status) "
                    "WHERE id = :id"),
            {"at": rt.clock() - timedelta(days=days), "s": status, "id": ticket},
        )  # fmt: skip


async def _waiting_run(rt: Runtime, team: int) -> Any:
    [row] = await _q(
        rt, "SELECT id, run, run_at FROM background_task WHERE kind = 'TIME_RULE' "
        "AND team_id = :t AND status = 'WAITING'", t=team,
    )  # fmt: skip
    return row


async def _status(rt: Runtime, ticket: int) -> str:
    [(status,)] = await _q(rt, "SELECT status FROM ticket WHERE id = :id", id=ticket)
    return str(status)


async def _actions(rt: Runtime, ticket: int) -> list[Any]:
    return await _q(
        rt, "SELECT rule, revision, task_id FROM ticket_rule_action WHERE ticket_id = :t "
        "ORDER BY id", t=ticket,
    )  # fmt: skip


async def test_resolved_for_n_days_closes_once_with_history_and_audit(
    rt: Runtime, world: World
) -> None:
    ticket = world.tickets["resolved"]
    await _since(rt, ticket, 8)
    await rule_runs.save_rules(rt, world.admin, world.team, Rules(close_resolved_after=7))
    first = await _waiting_run(rt, world.team)
    assert first.run_at == rt.clock()  # saving queues a run at once
    await run_task(rt, first.id)
    assert await _status(rt, ticket) == "CLOSED"
    history = await _q(rt, "SELECT field, new_value, actor_id FROM ticket_history "
                       "WHERE ticket_id = :t", t=ticket)  # fmt: skip
    assert [tuple(h) for h in history] == [("status", "CLOSED", None)]
    [entry] = await _q(
        rt, "SELECT actor, action, task_ids FROM ops_audit WHERE action = 'time_rule'"
    )
    assert (entry.actor, entry.task_ids) == ("time rules", [first.id])
    # The next run, a duplicate task, and a rescued execution of the first all find it done.
    second = await _waiting_run(rt, world.team)
    await run_task(rt, second.id)
    again = await rule_runs.run_once(rt, world.team, first.id)
    assert again.acted == []
    planned = time_rules.Action("close", rt.clock(), f"ticket-rule:close:{ticket}:0")
    assert not await rule_runs.act(rt, world.team, 999_999, ticket, planned)
    assert [tuple(a) for a in await _actions(rt, ticket)] == [("close", 0, first.id)]


async def test_two_runs_at_once_close_once(rt: Runtime, world: World) -> None:
    ticket = world.tickets["resolved"]
    await _since(rt, ticket, 8)
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("INSERT INTO team_time_rules (team_id, close_resolved_after) "
                                   "VALUES (:t, 7)"), {"t": world.team})  # fmt: skip
    a, b = await asyncio.gather(
        rule_runs.run_once(rt, world.team, 1), rule_runs.run_once(rt, world.team, 2)
    )
    assert len(a.acted) + len(b.acted) == 1
    assert len(await _actions(rt, ticket)) == 1


async def test_a_reply_in_between_supersedes_the_plan(rt: Runtime, world: World) -> None:
    ticket = world.tickets["resolved"]
    await _since(rt, ticket, 8)
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("INSERT INTO team_time_rules (team_id, close_resolved_after) "
                                   "VALUES (:t, 7)"), {"t": world.team})  # fmt: skip
    [plan] = await rows(rt.pg, rule_sql.DUE,
                        {"team": world.team, "now": rt.clock(), "after": 0, "limit": 10})  # fmt: skip
    planned = time_rules.Action(plan["rule"], plan["due"],
                                f"ticket-rule:close:{ticket}:{plan['revision']}")  # fmt: skip
    await conversation.post_message(rt, world.customer, ticket, "It broke again")
    assert not await rule_runs.act(rt, world.team, 1, ticket, planned)
    assert await _status(rt, ticket) == "OPEN"
    assert await _actions(rt, ticket) == []


async def test_pending_is_reminded_then_resolved(rt: Runtime, world: World) -> None:
    ticket = world.tickets["login"]
    await _since(rt, ticket, 4, "PENDING")
    rules = Rules(remind_pending_after=3, resolve_pending_after=2)
    await rule_runs.save_rules(rt, world.admin, world.team, rules)
    first = await _waiting_run(rt, world.team)
    await run_task(rt, first.id)
    assert await _status(rt, ticket) == "PENDING"
    [msg] = await _q(rt, "SELECT author_id, internal, body FROM ticket_message WHERE ticket_id = :t",
                     t=ticket)  # fmt: skip
    assert (msg.author_id, msg.internal) == (world.admin, False)
    assert msg.body == rule_runs.REMIND_TEXT
    mails = await _q(rt, "SELECT owner_id FROM background_task WHERE kind = 'EMAIL'")
    assert [m.owner_id for m in mails] == [world.customer]  # mailed like any reply
    [(revision,)] = await _q(rt, "SELECT revision FROM ticket WHERE id = :t", t=ticket)
    assert [tuple(a) for a in await _actions(rt, ticket)] == [("remind", revision, first.id)]
    # The next run waits for the resolve, two days after the reminder.
    second = await _waiting_run(rt, world.team)
    assert second.run_at == rt.clock() + timedelta(days=2)
    rt.clock.advance(2 * DAY + 1)  # type: ignore[attr-defined]
    await run_task(rt, second.id)
    assert await _status(rt, ticket) == "RESOLVED"
    assert [a.rule for a in await _actions(rt, ticket)] == ["remind", "resolve"]
    # The runs, newest first, with the tickets each touched.
    runs = await rule_runs.list_runs(rt, world.staff, world.team)
    touched = {r.task_id: [(t.ticket_id, t.rule) for t in r.touched] for r in runs}
    assert touched[first.id] == [(ticket, "remind")]
    assert touched[second.id] == [(ticket, "resolve")]
    assert runs[0].status == "WAITING" and runs[0].touched == []


async def test_next_run_waits_no_longer_than_the_shortest_rule(rt: Runtime, world: World) -> None:
    await rule_runs.save_rules(rt, world.admin, world.team, Rules(close_resolved_after=5))
    await run_task(rt, (await _waiting_run(rt, world.team)).id)  # "Old issue" resolved just now
    nxt = await _waiting_run(rt, world.team)
    assert nxt.run_at <= rt.clock() + timedelta(days=5)


async def test_the_scheduler_restarts_a_team_with_no_active_run(rt: Runtime, world: World) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("INSERT INTO team_time_rules (team_id, close_resolved_after, "
                                   "updated_by_id) VALUES (:t, 7, :a)"),
                           {"t": world.team, "a": world.admin})  # fmt: skip
    await scheduler.run_once(rt)
    await scheduler.run_once(rt)
    runs = await _q(rt, "SELECT owner_id, scope_key FROM background_task WHERE kind = 'TIME_RULE'")
    assert [tuple(r) for r in runs] == [(world.admin, f"time-rules:{world.team}")]


async def test_rules_off_queue_nothing(rt: Runtime, world: World) -> None:
    await rule_runs.save_rules(rt, world.admin, world.team, Rules())
    assert await _q(rt, "SELECT id FROM background_task WHERE kind = 'TIME_RULE'") == []


async def test_who_reads_and_who_saves(rt: Runtime, world: World) -> None:
    rules = Rules(close_resolved_after=3)
    saved = await rule_runs.save_rules(rt, world.admin, world.team, rules)
    assert saved.rules == rules and saved.updated_by_id == world.admin
    assert (await rule_runs.read_rules(rt, world.staff, world.team)).rules == rules
    with pytest.raises(NotAllowed):
        await rule_runs.save_rules(rt, world.staff, world.team, Rules())
    for who in (world.customer, world.outsider):
        with pytest.raises(NotFound) as refused:
            await rule_runs.read_rules(rt, who, world.team)
        assert refused.value.message == "Team not found."
        with pytest.raises(NotFound):
            await rule_runs.save_rules(rt, who, world.team, Rules())
        with pytest.raises(NotFound):
            await rule_runs.list_runs(rt, who, world.team)
    with pytest.raises(NotFound) as missing:
        await rule_runs.read_rules(rt, world.admin, 987_654)
    assert missing.value.message == "Team not found."


def test_bad_rules_say_what_to_fix() -> None:
    with pytest.raises(ValidationProblem) as bad:
        Rules(resolve_pending_after=2)
    assert bad.value.field == "resolve_pending_after"
    with pytest.raises(ValidationProblem):
        Rules(close_resolved_after=0)
