"""The demo's clocks: Acme starts with an SLA policy (business hours in a real zone, an urgent
ticket answered within the hour) and time rules (7 / 3 / 4 days), read back through the desk as
any face reads them; a second seed writes nothing and keeps a policy edited since; the
scheduler's pass starts Acme's rule runs; Globex has neither."""

from __future__ import annotations

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.helpdesk import sla_store
from desk.seed import demo as seed
from desk.work import rule_runs


async def _ids(rt: Runtime) -> tuple[int, int, int]:
    async with rt.engine.connect() as conn:
        teams = dict((await conn.execute(sa.text("SELECT name, id FROM team"))).all())
        zhou = (
            await conn.execute(sa.text("SELECT id FROM app_user WHERE email = 'zhou@acme.test'"))
        ).scalar_one()
    return teams[seed.ACME], teams[seed.GLOBEX], int(zhou)


async def test_acme_starts_with_an_sla_policy_and_time_rules(rt: Runtime) -> None:
    first = await seed.seed_demo(rt)
    assert first.clocks == 2
    acme, globex, zhou = await _ids(rt)
    policy = await sla_store.get_team_policy(rt, zhou, acme)
    assert policy is not None
    assert policy.calendar_doc["zone"] == "Asia/Shanghai"
    assert policy.calendar_doc["hours"]["mon"] == ["09:00-17:00"]
    assert "sat" not in policy.calendar_doc["hours"]
    assert policy.targets_doc["first_response"]["URGENT"] == 3600
    rules = (await rule_runs.read_rules(rt, zhou, acme)).rules
    assert (rules.close_resolved_after, rules.remind_pending_after,
            rules.resolve_pending_after) == (7, 3, 4)  # fmt: skip
    async with rt.engine.connect() as conn:
        for table in ("team_sla_policy", "team_time_rules"):
            n = await conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE team_id = :t"),
                                   {"t": globex})  # fmt: skip
            assert n.scalar_one() == 0, table
    started = await rule_runs.ensure_runs(rt.pg, now=rt.clock())
    assert len(started) == 1
    [run] = await rule_runs.list_runs(rt, zhou, acme)
    assert run.task_id == started[0]


async def test_a_second_seed_writes_nothing_and_keeps_an_edit(rt: Runtime) -> None:
    await seed.seed_demo(rt)
    acme, _, zhou = await _ids(rt)
    edited = dict(seed.clocks.DEMO_CALENDAR, zone="Europe/Berlin")
    await sla_store.set_team_policy(rt, zhou, acme, calendar=edited,
                                    targets=seed.clocks.DEMO_TARGETS)  # fmt: skip
    again = await seed.seed_demo(rt)
    assert again.clocks == 0
    policy = await sla_store.get_team_policy(rt, zhou, acme)
    assert policy is not None and policy.calendar_doc["zone"] == "Europe/Berlin"
