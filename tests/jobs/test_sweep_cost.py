"""The sweep's claim stays cheap per row (issue 10, sweep target): a send is an in-place (HOT)
update that touches no index, and a whole pass's 'sent' events are written by one statement-level
trigger instead of one trigger call per row — and the event log still tells each send once."""

import sqlalchemy as sa

from jobs import dispatcher
from tests.helpers import wait_for

DUE = 300


async def _due_rows(rt, world) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO background_task (kind, team_id, owner_id, scope_key, run_at) "
                "SELECT 'NOOP', :t, :o, 'noop:due:' || g, :now FROM generate_series(1, :n) g"
            ),
            {"t": world.team, "o": world.staff, "n": DUE, "now": rt.clock()},
        )


async def _hot_updates(rt) -> int:
    async with rt.engine.connect() as conn:
        await conn.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
        q = "SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'background_task'"
        return int((await conn.execute(sa.text(q))).scalar_one())


async def test_a_sweep_sends_in_place_and_logs_each_send_once(rt, world):
    await _due_rows(rt, world)
    before = await _hot_updates(rt)
    assert await dispatcher.run_once(rt) == DUE
    # Statistics reach pg_stat_user_tables within a second or so of the commit.
    # Nearly every send is in place (a page's last rows may not fit); on full pages: none.
    await wait_for(
        lambda: _hot(rt, before + DUE * 0.8), timeout=30, what="HOT updates (fillfactor)"
    )
    async with rt.engine.connect() as conn:
        sent = (
            await conn.execute(
                sa.text(
                    "SELECT count(*), count(DISTINCT e.task_id) FROM task_event e "
                    "JOIN background_task b ON b.id = e.task_id "
                    "WHERE e.event = 'sent' AND b.scope_key LIKE 'noop:due:%' "
                    " AND e.at = b.dispatched_at AND e.run = b.run"
                )
            )
        ).one()
    assert tuple(sent) == (DUE, DUE), "one 'sent' event per send"


async def _hot(rt, wanted: float) -> bool:
    return await _hot_updates(rt) >= wanted


async def test_the_claim_calls_no_row_trigger(rt, world):
    await _due_rows(rt, world)
    async with rt.engine.begin() as conn:
        plan = "\n".join(
            r[0]
            for r in await conn.execute(
                sa.text(
                    "EXPLAIN (ANALYZE) UPDATE background_task SET dispatched_at = now(), "
                    " sends = sends + 1 WHERE status = 'WAITING'"
                )
            )
        )
        await conn.rollback()
    assert "background_task_event_update" not in plan, plan
    assert "background_task_event_sent: time=" in plan and "calls=1" in plan, plan
