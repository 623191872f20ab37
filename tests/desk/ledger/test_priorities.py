"""Priorities (desk/ledger/sends.py `urgent`, desk/core/queue.py `line_score`, docs/architecture.md
"Priorities"): a reminder or a security e-mail that is due goes ahead of the ordinary work
waiting in its lane's line in Redis, which arq's workers take lowest score first; one not due
yet keeps its due time, so nothing starts early."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from desk.core.queue import Send, job_id
from desk.core.runtime import Runtime
from desk.ledger import mail as ledger_mail
from desk.ledger import sends as ledger_sends
from tests.factories import World


async def _due_line(rt: Runtime, lane: str) -> list[bytes]:
    """The lane's due jobs in the order an arq worker takes them (its `_poll_iteration`)."""
    now = int(time.time() * 1000)
    found: list[bytes] = await rt.redis.zrangebyscore(rt.queue.lane_queue(lane), "-inf", now)
    return found


async def test_an_urgent_send_that_is_due_goes_ahead_of_older_ordinary_ones(rt: Runtime) -> None:
    q, now = rt.queue, datetime.now(UTC)
    ordinary = [Send(900 + i, 1, 1, "short", now - timedelta(minutes=10 - i)) for i in range(3)]
    assert (await q.send_many(ordinary)).accepted == [True] * 3
    reset = Send(999, 1, 1, "short", now, urgent=True)
    assert (await q.send_many([reset])).accepted == [True]
    line = await _due_line(rt, "short")
    assert line[0] == job_id(q.prefix, 999, 1, 1).encode()
    assert line[1:] == [job_id(q.prefix, 900 + i, 1, 1).encode() for i in range(3)]
    described = await q.describe(999, 1, 1, "short")
    assert described.startswith("queued ahead of ordinary work")


async def test_an_urgent_send_not_yet_due_keeps_its_time(rt: Runtime) -> None:
    q = rt.queue
    later = (datetime.now(UTC) + timedelta(minutes=5)).replace(microsecond=0)
    assert (await q.send_many([Send(77, 1, 1, "short", later, urgent=True)])).accepted == [True]
    score = await rt.redis.zscore(q.lane_queue("short"), job_id(q.prefix, 77, 1, 1))
    assert score == later.timestamp() * 1000
    assert await _due_line(rt, "short") == []


async def test_the_ledger_tells_which_sends_are_urgent(rt: Runtime, world: World) -> None:
    cases = {
        "password_reset": ("EMAIL", True), "invitation": ("EMAIL", True),
        "ticket_message": ("EMAIL", False), "export_ready": ("EMAIL", False),
        "reminder": ("REMINDER", True), "noop": ("NOOP", False),
    }  # fmt: skip
    ids = {}
    for name, (kind, _) in cases.items():
        task = await ledger_mail.accept_email(
            rt.pg, team_id=world.team, owner_id=world.staff, scope_key=f"prio:{name}",
            filters={"to": "x@x.test", "template": name}, max_attempts=3, now=rt.clock(),
        )  # fmt: skip
        assert task.id is not None
        ids[task.id] = name
        if kind != "EMAIL":  # the same row as a task of another kind
            async with rt.engine.begin() as conn:
                await conn.execute(
                    sa.text("UPDATE background_task SET kind = :k WHERE id = :t"),
                    {"k": kind, "t": task.id},
                )
    due = await ledger_sends.claim_due(
        rt.pg, now=rt.clock(), lookahead=timedelta(minutes=1), redelivery=timedelta(minutes=1),
        limit=100, team_max=2,
    )  # fmt: skip
    got = {ids[d.task_id]: d.urgent for d in due}
    assert got == {name: want for name, (_, want) in cases.items()}
    for name, (kind, want) in cases.items():  # the Python twin answers alike
        assert ledger_sends.urgent(kind, name if kind == "EMAIL" else None) is want
