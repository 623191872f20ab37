"""The watched task row: its delay follows the schedule by watch age (FakeClock), a
terminal row carries no polling attributes and tells the page what finished, a row watched for
ten minutes stops and offers Refresh, and the "anything newer?" check is cheap."""

from __future__ import annotations

import json
import re

import pytest

from desk.ledger import lanes
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from ui.watch import polling

TRIGGER = re.compile(r'data-poll data-since="[\d.]+" data-delay="(\d+)"')


def delay_of(html: str) -> int | None:
    m = TRIGGER.search(html)
    return int(m.group(1)) if m else None


def test_schedule_is_the_designed_one() -> None:
    ages, seen, t = [], [], 0.0
    while (d := polling.next_delay(t)) is not None:
        seen.append(d)
        ages.append(t)
        t += d + 0.05  # each poll lands a little after its nominal time
    assert seen[:9] == [1, 1, 2, 2, 5, 5, 5, 10, 10]
    assert set(seen[7:]) == {10}
    assert ages[-1] < polling.STOP_AFTER <= t
    assert polling.next_delay(-3) == 1  # a `since` in the future counts as brand new


async def test_row_delay_follows_the_schedule_by_age(page_as, world, rt, clock) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    page = await page_as(world.staff)
    since = clock.now.timestamp()
    expected = [(0, 1), (1, 1), (2, 2), (4, 2), (6, 5), (11, 5), (16, 5), (21, 10), (300, 10)]
    for age, delay in expected:
        clock.now = clock.now.fromtimestamp(since + age, clock.now.tzinfo)
        r = await page.hx_get(f"/tasks/{task.id}?since={since}")
        assert r.status_code == 200
        assert r.headers["vary"] == "HX-Request"
        assert delay_of(r.text) == delay, (age, r.text)
        assert f'data-since="{since:.3f}"' in r.text  # the page's watcher sends it back
        assert 'hx-trigger="load' not in r.text  # no timer of its own (ui/watch/watcher.py)
        assert "Queued" in r.text and "HX-Trigger" not in r.headers


async def test_a_fresh_row_in_a_list_polls_after_one_second(page_as, world, rt) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    r = await (await page_as(world.staff)).get("/tasks")
    row = r.text[r.text.index(f'id="task-{task.id}"') :]
    assert delay_of(row) == 1


async def test_a_row_watched_for_ten_minutes_stops_and_offers_refresh(
    page_as, world, rt, clock
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    since = clock.now.timestamp()
    clock.advance(polling.STOP_AFTER)
    r = await page.hx_get(f"/tasks/{task.id}?since={since}")
    assert "hx-trigger" not in r.text.split("<div class", 1)[0]  # the row itself does not poll
    assert delay_of(r.text) is None and "data-poll" not in r.text
    assert "Refresh" in r.text and f'hx-get="/tasks/{task.id}"' in r.text
    # Refresh starts watching again from now.
    r = await page.hx_get(f"/tasks/{task.id}")
    assert delay_of(r.text) == 1


async def test_a_terminal_row_has_no_polling_and_triggers_the_page(
    page_as, world, rt, clock
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    assert await execute(rt, registry(), task.id, task.run) == "done"
    r = await (await page_as(world.staff)).hx_get(f"/tasks/{task.id}?since={clock.now.timestamp()}")
    assert r.status_code == 200
    assert "hx-trigger" not in r.text and "hx-get" not in r.text and "data-poll" not in r.text
    assert "Completed" in r.text and f'href="/tasks/{task.id}/download"' in r.text
    finished = json.loads(r.headers["HX-Trigger"])["task-finished"]
    assert finished == {"id": task.id, "kind": "EXPORT", "status": "Completed"}
    assert 'id="announcer"' in r.text and "hx-swap-oob" in r.text  # said aloud, politely


async def test_running_row_shows_rows_and_eta(page_as, world, rt, clock) -> None:
    import sqlalchemy as sa

    task = await tasks.create_export(rt, world.staff, world.team, {})
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'RUNNING', attempts = 1, progress = 0.25, "
                "progress_current = 1000, progress_total = 4000, started_at = :t WHERE id = :id"
            ),
            {"t": clock.now, "id": task.id},
        )
    clock.advance(10)
    r = await (await page_as(world.staff)).hx_get(f"/tasks/{task.id}")
    assert "Running" in r.text
    assert "1,000 / 4,000 rows" in r.text
    assert 'value="25"' in r.text and "about 30 s left" in r.text
    assert "Attempt 1 of 5" in r.text and "Cancel" in r.text


async def test_failed_row_shows_error_and_retry(page_as, world, rt) -> None:
    import sqlalchemy as sa

    task = await tasks.create_export(rt, world.staff, world.team, {})
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'FAILED', attempts = 5, "
                "last_error = 'The database went away.', finished_at = now() WHERE id = :id"
            ),
            {"id": task.id},
        )
    page = await page_as(world.staff)
    r = await page.hx_get(f"/tasks/{task.id}")
    assert "Failed" in r.text and "The database went away." in r.text and "Retry" in r.text
    r = await page.hx_post(f"/tasks/{task.id}/retry")
    assert r.status_code == 200 and "Queued" in r.text and delay_of(r.text) == 1


async def test_cancel_from_the_row(page_as, world, rt) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    r = await (await page_as(world.staff)).hx_post(f"/tasks/{task.id}/cancel")
    assert r.status_code == 200 and "Cancelled" in r.text and delay_of(r.text) is None
    assert (await tasks.get_task(rt, world.staff, task.id)).status == "CANCELLED"


async def test_newer_check_is_204_until_something_new(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    first = await tasks.create_export(rt, world.staff, world.team, {})
    r = await page.hx_get(f"/tasks?newer_than={first.id}&limit=8")
    assert r.status_code == 204
    second = await tasks.create_export(rt, world.staff, world.team, {"q": "printer"})
    r = await page.hx_get(f"/tasks?newer_than={first.id}&limit=8")
    assert r.status_code == 200
    assert f'id="task-{second.id}"' in r.text and f'id="task-{first.id}"' in r.text
    assert f'data-newest="{second.id}"' in r.text  # the next check asks past the new newest


@pytest.mark.parametrize("since", ["abc", "-5"])
async def test_bad_since_is_a_clear_400(page_as, world, rt, since) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    r = await (await page_as(world.staff)).get(f"/tasks/{task.id}?since={since}")
    assert r.status_code == 400 and "since" in r.text


async def test_a_waiting_row_in_a_paused_lane_says_an_operator_paused_it(
    page_as, world, rt
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    page = await page_as(world.staff)
    assert 'data-testid="lane-paused"' not in (await page.hx_get(f"/tasks/{task.id}")).text
    await lanes.pause(rt, lanes.lane_of("EXPORT"), None)
    row = (await page.hx_get(f"/tasks/{task.id}")).text
    assert "Paused by an operator" in row and delay_of(row) is not None  # still followed
    listed = (await page.get("/tasks")).text
    assert listed.count('data-testid="lane-paused"') == 1
    await lanes.resume(rt, lanes.lane_of("EXPORT"))
    assert "Paused by an operator" not in (await page.hx_get(f"/tasks/{task.id}")).text
