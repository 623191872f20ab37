"""The one-round-trip accept (desk.ledger.intake.accept_at_once): BEGIN, the person's lock, the accept
statement and COMMIT as one simple query with values bound client-side. Its text must arrive
byte for byte, and a failing statement must leave no transaction open and no lock held. That
it takes the same lock as the keyed path is tests/desk/ledger/test_accept_locks.py's first test (the
lock is held there under `desk.ledger.intake.lock_person`'s text)."""

from __future__ import annotations

import psycopg
import pytest

from desk.core import locks
from desk.ledger import intake
from desk.ledger.accept import NewTask
from desk.work import tasks


async def test_hostile_filter_text_is_stored_exactly(rt, world) -> None:
    q = "a'; COMMIT; DROP TABLE background_task; -- \\' $$ %s %(x)s 退款 \\x00"
    task = await tasks.create_export(rt, world.staff, world.team, {"q": q})
    row = await rt.pg.one(
        "SELECT filters->>'q' AS q FROM background_task WHERE id = %s", (task.id,)
    )
    assert row == {"q": q}


async def test_a_failing_statement_rolls_back_and_frees_the_lock(rt, world) -> None:
    now = rt.clock()
    new = NewTask(
        kind="EXPORT", team_id=world.team, owner_id=world.staff, scope_key="export:bad",
        run_at=now, max_attempts=2**40, filters={},  # out of range for ::int: the insert fails
    )  # fmt: skip
    quota = intake.Quota(10, 100, now)
    async with rt.pg.connection() as conn:
        with pytest.raises(psycopg.errors.NumericValueOutOfRange):
            await intake.accept_at_once(conn, new, quota, now=now, dispatched=True)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with psycopg.connect(rt.settings.libpq_url) as other:
        free = other.execute(
            f"SELECT pg_try_advisory_xact_lock(hashtextextended(%s, {locks.PERSON_ACCEPT}))",
            (f"accept:{world.team}:{world.staff}",),
        ).fetchone()
        assert free == (True,)
    row = await rt.pg.one(
        "SELECT count(*) AS n FROM background_task WHERE scope_key = 'export:bad'"
    )
    assert row == {"n": 0}


async def test_a_connection_that_lost_the_prepared_statement_prepares_it_again(rt, world) -> None:
    now = rt.clock()
    quota = intake.Quota(10, 100, now)

    def new(scope: str) -> NewTask:
        return NewTask(
            kind="EXPORT", team_id=world.team, owner_id=world.staff, scope_key=scope,
            run_at=now, max_attempts=3, filters={"q": scope},
        )  # fmt: skip

    async with rt.pg.connection() as conn:
        first = await intake.accept_at_once(
            conn, new("export:one"), quota, now=now, dispatched=True
        )
        await conn.execute("DISCARD ALL")  # what a pooler's reset would do
        second = await intake.accept_at_once(
            conn, new("export:two"), quota, now=now, dispatched=True
        )
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert first.task is not None and second.task is not None
    assert second.active == 1  # the statement saw the first accept
