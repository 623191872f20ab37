"""Pausing a lane from the console, with a real worker: the lane's tasks are still accepted and
wait unsent while other lanes run; the pages say "paused by an operator"; resuming sends what
waited. Both actions are audited; only an operator may take them."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from desk.console import health
from desk.core.clock import utcnow
from desk.ledger import events
from desk.people import audit
from desk.work import tasks
from tests.console.conftest import HTML
from tests.helpers import running_workers, wait_for


def _status(rt, task_id: int, wanted: str):
    async def probe():
        async with rt.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.text("SELECT status, dispatched_at FROM background_task WHERE id = :i"),
                    {"i": task_id},
                )
            ).one()
        return row if row.status == wanted else None

    return probe


def _swept_after(rt, moment):
    async def probe():
        report = await health.check(rt)
        return report.last_sweep is not None and report.last_sweep > moment

    return probe


@pytest.mark.slow
async def test_pause_holds_the_lane_and_resume_sends_what_waited(
    page_as, rt, world, settings, tmp_path, operator
) -> None:
    rt.clock = utcnow
    page = await page_as(operator)
    r = await page.hx_post("/ops/lanes/long/pause")
    assert r.status_code == 204 and r.headers["HX-Redirect"] == "/ops/lanes"
    with running_workers(settings, tmp_path):
        export = await tasks.create_export(rt, world.staff, world.team, {})  # long lane
        short = await tasks.submit_noop(rt, world.staff, world.team)  # short lane
        await wait_for(_status(rt, short.id, "COMPLETED"), timeout=30, what="short lane runs")
        submitted = utcnow()
        await wait_for(_swept_after(rt, submitted), timeout=30, what="a dispatcher pass after")
        held = await _status(rt, export.id, "WAITING")()
        assert held is not None and held.dispatched_at is None, "paused: accepted, not sent"
        assert "sent" not in [e.event for e in await events.story(rt, export.id)]
        lanes_page = (await page.get("/ops/lanes", headers=HTML)).text
        long_row = lanes_page.split('data-lane="long"', 1)[1].split("</tr>", 1)[0]
        assert "Paused by an operator" in long_row and "ops@site.test" in long_row
        assert 'data-paused="false"' in lanes_page.split('data-lane="short"', 1)[1][:40]
        story = (await page.get(f"/ops/tasks/{export.id}", headers=HTML)).text
        assert "Waiting: its lane (long) is paused by an operator" in story
        overview = (await page.get("/ops", headers=HTML)).text
        assert 'data-testid="paused-lanes"' in overview
        r = await page.hx_post("/ops/lanes/long/resume")
        assert r.status_code == 204
        await wait_for(_status(rt, export.id, "COMPLETED"), timeout=30, what="export after resume")
    entries = [
        (e.action, e.detail, e.actor) for e in await audit.recent(rt, operator=True, team_ids=())
    ]
    assert entries[:2] == [
        ("lane_resume", "long", "ops@site.test"),
        ("lane_pause", "long", "ops@site.test"),
    ]
    trail = (await page.get("/ops/audit", headers=HTML)).text
    assert "Paused a lane" in trail and "Resumed a lane" in trail


async def test_unknown_lane_is_a_4xx(page_as, world, operator) -> None:
    page = await page_as(operator)
    r = await page.hx_post("/ops/lanes/medium/pause")
    assert r.status_code == 422 and "lanes are short, long" in r.text
