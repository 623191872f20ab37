"""The overview's figures, with injected time: counts per kind, finished work per minute over
the hour and the day, start latency and reminder lateness percentiles, the oldest overdue task —
each within the viewer's scope — and the page's live block polling itself."""

from __future__ import annotations

import re
from datetime import timedelta

import sqlalchemy as sa

from desk.console import overview as console
from desk.people import operators
from desk.work import tasks
from tests.console.conftest import HTML


async def _noop(rt, world, team=None, **cols) -> int:
    owner = world.staff if team is None else world.outsider
    t = await tasks.submit_noop(rt, owner, team or world.team)
    if cols:
        sets = ", ".join(f"{k} = :{k}" for k in cols)
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text(f"UPDATE background_task SET {sets} WHERE id = :id"), {**cols, "id": t.id}
            )
    return t.id or 0


async def test_counts_series_latency_and_overdue(rt, world, clock, operator) -> None:
    now = clock.now
    ago = lambda s: now - timedelta(seconds=s)  # noqa: E731
    await _noop(rt, world)  # queued
    await _noop(rt, world, run_at=now + timedelta(minutes=30))  # scheduled
    await _noop(rt, world, attempts=1, last_error="boom")  # retrying
    await _noop(rt, world, status="RUNNING", attempts=1, started_at=ago(1), run_at=ago(3))
    for delay in (1, 2, 3, 4, 10):  # started `delay` s after due, finished now
        await _noop(rt, world, status="COMPLETED", run_at=ago(60), started_at=ago(60 - delay),
                    finished_at=now)  # fmt: skip
    await _noop(rt, world, status="FAILED", finished_at=ago(120), last_error="x")
    await _noop(rt, world, status="COMPLETED", finished_at=ago(3 * 3600))  # day, not hour
    overdue = await _noop(rt, world, run_at=ago(300))
    await _noop(rt, world, team=world.other_team, run_at=ago(900))  # another team's, older
    reminder = await _noop(
        rt, world, status="COMPLETED", run_at=ago(100), started_at=ago(70), finished_at=ago(69)
    )  # a reminder that fired 30 s late
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET kind = 'REMINDER' WHERE id = :id"), {"id": reminder}
        )

    admin = await console.overview(rt, await operators.scope_of(rt, world.admin))
    noop = next(k for k in admin.kinds if k.kind == "NOOP")
    assert (noop.queued, noop.scheduled, noop.retrying, noop.running) == (2, 1, 1, 1)
    assert (noop.failed, noop.completed) == (1, 5)
    short = next(
        lane
        for lane in admin.by_lane(lambda k: "long" if k in ("EXPORT", "IMPORT") else "short")
        if lane.kind == "short"
    )
    assert (short.queued, short.running, short.completed) == (2, 1, 6)  # the reminder too
    assert sum(admin.hour.completed) == 5 + 1 and admin.hour.completed[-1] == 5
    assert admin.hour.failed[-3] == 1  # two minutes ago
    assert sum(admin.day.completed) == 5 + 1 + 1 and len(admin.day.completed) == 96
    assert admin.start_latency.count == 6  # five finished and one running
    assert admin.start_latency.p50 == 2.5 and 8 < (admin.start_latency.p95 or 0) <= 10
    assert admin.reminder_lateness.p50 == 30 and admin.reminder_lateness.count == 1
    assert admin.oldest_overdue is not None and admin.oldest_overdue.id == overdue
    everyone = await console.overview(rt, await operators.scope_of(rt, operator))
    assert everyone.oldest_overdue is not None and everyone.oldest_overdue.id != overdue
    assert everyone.totals.queued == admin.totals.queued + 1


async def test_the_overview_page_lives_by_polling_itself(page_as, rt, world, operator) -> None:
    page = await page_as(operator)
    r = await page.get("/ops", headers=HTML)
    assert r.status_code == 200 and "<svg" in r.text and 'data-testid="total-queued">0<' in r.text
    poll = re.search(r'hx-get="(/ops\?watch=[0-9.]+)" hx-trigger="load delay:(\d+)s"', r.text)
    assert poll and poll.group(2) == "3"
    await tasks.submit_noop(rt, world.staff, world.team)
    fragment = await page.hx_get(poll.group(1).replace("&amp;", "&"))
    assert fragment.text.lstrip().startswith('<div id="live"')  # just the block, with its next poll
    assert 'data-testid="total-queued">1<' in fragment.text and "<html" not in fragment.text
    assert 'hx-trigger="load delay:3s"' in fragment.text
    stale = await page.hx_get("/ops?watch=1000")  # watched for ages: slower, never off
    assert 'hx-trigger="load delay:15s"' in stale.text
    late = await _noop(rt, world, run_at=rt.clock() - timedelta(minutes=5))
    text = (await page.get("/ops", headers=HTML)).text
    oldest = text.split('data-testid="oldest-overdue">', 1)[1].split("</dd>", 1)[0]
    assert f'href="/ops/tasks/{late}"' in oldest and "due 5.0 min ago" in oldest
    assert 'data-lane="short"' in text and 'data-lane="long"' in text


async def test_backlog_by_team_puts_the_team_with_most_due_work_first(
    page_as, rt, world, clock, operator
) -> None:
    """A noisy team's pile-up is visible at a glance; a team's admin sees only their teams'."""
    now = clock.now
    for _ in range(5):
        await _noop(rt, world, team=world.other_team, run_at=now - timedelta(seconds=40))
    await _noop(rt, world, run_at=now - timedelta(seconds=5))
    await _noop(rt, world, status="RUNNING", attempts=1, started_at=now)
    await _noop(rt, world, run_at=now + timedelta(hours=1))  # not due: not backlog
    everyone = await console.overview(rt, await operators.scope_of(rt, operator))
    rows = [(b.team_id, b.lane, b.due, b.running) for b in everyone.teams]
    assert rows == [(world.other_team, "short", 5, 0), (world.team, "short", 1, 1)]
    assert everyone.teams[0].oldest_due_at == now - timedelta(seconds=40)
    admin = await console.overview(rt, await operators.scope_of(rt, world.admin))
    assert [b.team_id for b in admin.teams] == [world.team]  # the other team is not theirs
    text = (await (await page_as(world.admin)).get("/ops", headers=HTML)).text
    table = text.split('data-testid="team-backlog"', 1)[1].split("</section>", 1)[0]
    assert f'data-team="{world.team}"' in table and f'data-team="{world.other_team}"' not in table
    assert f'href="/ops/tasks?team={world.team}&amp;status=WAITING">1<' in table
    assert "due 5 s ago" in table or "due 5.0 s ago" in table
