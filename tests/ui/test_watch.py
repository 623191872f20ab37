"""The page watcher `GET /watch` (issue 11): one request for every row, the bell, the badge and
the list; 204 without a body while nothing the page shows changed; the changed fragments only,
out of band, otherwise; the next tick from the rows' schedule (FakeClock); a task the viewer may
not see answers exactly like one that does not exist."""

from __future__ import annotations

import itertools
import json
import re
from datetime import timedelta

import pytest

from desk.helpdesk import notifications
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from ui.watch import polling

ROW = re.compile(r'data-task-id="(\d+)"[^>]*data-poll data-since="([\d.]+)" [^>]*data-v="(\w+)"')


def test_due_in_keeps_the_schedule_points_whoever_asks() -> None:
    points = [1, 2, 4, 6, 11, 16, 21, 31, 41]
    for a, b in itertools.pairwise([0, *points]):
        assert polling.due_in(a + 0.05) == pytest.approx(b - a - 0.05)  # asked a bit late
    assert polling.due_in(3.0) == pytest.approx(1.0)  # asked early (another row was due): 4 s
    assert polling.due_in(599.0) == pytest.approx(1.0)  # the last point is the stop
    assert polling.due_in(polling.STOP_AFTER) is None
    assert polling.due_in(-2) == 1
    assert polling.tick_in([]) == polling.IDLE  # nothing unfinished: the idle check
    assert polling.tick_in([0.1, 40.0]) == pytest.approx(0.9)  # the earliest row wins
    assert polling.tick_in([45.0]) == polling.IDLE  # a steady row never slows the idle check
    # Many rows, each due at its own point, a few tenths apart: the page asks once for them.
    assert polling.tick_in([0.7, 1.5, 3.6]) == pytest.approx(polling.PAGE_MIN_GAP)


def watched_rows(html: str) -> list[str]:
    return [":".join(m) + ":1" for m in ROW.findall(html)]


async def test_unchanged_rows_answer_204_with_the_next_tick(page_as, world, rt, clock) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    since = float(token.split(":")[1])
    for age, due in [(0.05, 0.95), (1.1, 0.9), (2.5, 1.5), (6.2, 4.8), (30.0, 1.0), (45, 5)]:
        clock.now = clock.now.fromtimestamp(since + age, clock.now.tzinfo)
        r = await page.hx_get(f"/watch?r={token}")
        assert r.status_code == 204 and r.content == b"", (age, r.text)
        assert float(r.headers["X-Poll-In"]) == pytest.approx(due, abs=0.01), age
        assert "HX-Trigger" not in r.headers

    assert await execute(rt, registry(), task.id, task.run) == "done"
    r = await page.hx_get(f"/watch?r={token}")
    assert r.status_code == 200
    assert f'<li id="task-{task.id}"' in r.text and 'hx-swap-oob="true"' in r.text
    assert 'data-status="Completed"' in r.text and "data-poll" not in r.text
    assert f'href="/tasks/{task.id}/download"' in r.text
    finished = json.loads(r.headers["HX-Trigger"])["task-finished"]
    assert finished == {"id": task.id, "kind": "EXPORT", "status": "Completed"}
    assert float(r.headers["X-Poll-In"]) == polling.IDLE  # nothing left to follow
    assert 'id="bell"' not in r.text and 'id="tasks"' not in r.text  # only what changed


async def test_a_row_watched_for_ten_minutes_comes_back_with_refresh(
    page_as, world, rt, clock
) -> None:
    await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    clock.advance(polling.STOP_AFTER + 1)
    r = await page.hx_get(f"/watch?r={token}")
    assert r.status_code == 200 and "Refresh" in r.text and "data-poll" not in r.text
    assert float(r.headers["X-Poll-In"]) == polling.IDLE


async def test_a_row_that_cannot_be_cancelled_here_stays_so(page_as, world, rt) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    stale = token.rsplit(":", 2)[0] + ":0000:0"  # an old version, rendered without Cancel
    r = await page.hx_get(f"/watch?r={stale}")
    assert r.status_code == 200 and 'data-cancel="0"' in r.text
    assert f"/tasks/{task.id}/cancel" not in r.text


async def test_bell_and_badge_answer_only_when_they_differ(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    r = await page.hx_get("/watch?bell=-1&h=")
    assert r.status_code == 200
    assert 'id="bell"' in r.text and 'data-seen="0"' in r.text
    assert 'id="health"' in r.text and 'data-v="1-0"' in r.text and "No worker" in r.text
    assert r.text.count('hx-swap-oob="true"') == 2
    assert (await page.hx_get("/watch?bell=0&h=1-0")).status_code == 204

    async with rt.engine.begin() as conn:
        await notifications.insert_many(
            conn,
            user_ids=[world.staff],
            team_id=world.team,
            task_id=None,
            kind="REMINDER",
            text="Ping",
            link="/tickets",
        )
    r = await page.hx_get("/watch?bell=0&h=1-0")
    assert r.status_code == 200 and 'data-seen="1"' in r.text
    assert 'id="toast"' in r.text and "Ping" in r.text  # it grew: the newest one as a toast
    assert 'id="health"' not in r.text


async def test_the_list_answers_when_a_task_starts_elsewhere(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    first = await tasks.create_export(rt, world.staff, world.team, {})
    url = f"/watch?list=tasks&newest={first.id}&limit=8"
    assert (await page.hx_get(url)).status_code == 204
    second = await tasks.create_export(rt, world.staff, world.team, {"q": "printer"})  # GraphQL…
    r = await page.hx_get(url)
    assert r.status_code == 200 and 'hx-swap-oob="afterbegin:#task-rows"' in r.text
    assert f'id="task-{second.id}"' in r.text and f'data-newest="{second.id}"' in r.text
    assert f'id="task-{first.id}"' not in r.text  # only what the page does not show yet
    # A page whose list was empty gets the list itself.
    r = await page.hx_get("/watch?list=tasks&newest=0&limit=8")
    assert r.status_code == 200 and 'id="tasks" hx-swap-oob="innerHTML"' in r.text
    assert f'id="task-{first.id}"' in r.text and 'id="task-rows"' in r.text
    # An import page asks for imports only: an export is not news there.
    assert (await page.hx_get("/watch?list=imports&newest=0")).status_code == 204


async def test_a_task_you_may_not_see_answers_like_a_missing_one(page_as, world, rt) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})  # the staff member's own
    owner = await page_as(world.staff)
    (token,) = watched_rows((await owner.get("/tasks")).text)
    assert (await owner.hx_get(f"/watch?r={token}")).status_code == 204  # allowed

    other = await page_as(world.customer)
    missing = task.id + 1000
    seen = await other.hx_get(f"/watch?r={token}")
    absent = await other.hx_get(f"/watch?r={token.replace(str(task.id), str(missing), 1)}")
    assert seen.status_code == absent.status_code == 200
    assert seen.text.replace(str(task.id), "N") == absent.text.replace(str(missing), "N")
    assert 'data-status="Not found"' in seen.text and "Export" not in seen.text
    assert dict(seen.headers) | {"content-length": ""} == dict(absent.headers) | {
        "content-length": ""
    }
    # Nor does the list show it: the customer's list has nothing new.
    assert (await other.hx_get("/watch?list=tasks&newest=0")).status_code == 204


@pytest.mark.parametrize(
    "query", ["r=abc", "r=1:2", "r=1:x:v:1", "r=1:2:v:7", "r=-1:2:v:1", "bell=-5", "list=admin"]
)
async def test_bad_watch_input_is_a_clear_4xx(page_as, world, query) -> None:
    r = await (await page_as(world.staff)).hx_get(f"/watch?{query}")
    assert r.status_code in (400, 422), (query, r.text)
    assert query.split("=")[0] in r.text


async def test_watch_needs_a_session(page_as) -> None:
    r = await (await page_as(None)).hx_get("/watch?bell=-1")
    assert r.status_code in (401, 403) or r.headers.get("HX-Redirect")


async def test_a_tick_is_one_statement_whatever_it_asks(page_as, world, rt, app, clock) -> None:
    """Session, bell count, every watched row (changed ones included) and the list's check: one
    round trip (desk.reads.tick); the worker badge is the process's shared read (warmed here)."""
    from tests.desk.reads.test_reads import counting

    done = await tasks.create_export(rt, world.staff, world.team, {})
    waiting = await tasks.create_export(rt, world.staff, world.team, {"q": "printer"})
    page = await page_as(world.staff)
    tokens = watched_rows((await page.get("/tasks")).text)
    assert len(tokens) == 2
    clock.advance(1)  # the worker's writes are later than the page's copy, as in life
    assert await execute(rt, registry(), done.id, done.run) == "done"
    await page.hx_get("/watch?h=")  # the badge's read, shared for a while
    newer = await tasks.create_export(rt, world.staff, world.team, {"q": "refund"})
    query = "&".join(f"r={t}" for t in tokens)
    url = f"/watch?{query}&bell=-1&h=&list=tasks&newest={waiting.id}&limit=8"
    with counting(app.state.runtime.pg) as seen:
        r = await page.hx_get(url)
    assert r.status_code == 200
    assert 'data-status="Completed"' in r.text and 'id="bell"' in r.text  # a row, the bell
    assert f'id="task-{newer.id}"' in r.text  # and the list's newer row
    assert seen[0] == "checkout" and len(seen) == 2, seen


async def test_a_change_made_by_time_alone_reads_the_row_again(page_as, world, rt, clock) -> None:
    """A row whose `updated_at` is still the page's is read without its whole data; when its
    version moved all the same (Scheduled → Queued: time alone), it is read once more and
    answered like any changed row."""
    from desk.work import reminders

    due = clock.now + timedelta(minutes=1)
    task = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], at=due)
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    assert (await page.hx_get(f"/watch?r={token}")).status_code == 204  # still Scheduled
    clock.advance(60)
    r = await page.hx_get(f"/watch?r={token}")
    assert r.status_code == 200 and f'id="task-{task.id}"' in r.text
    assert 'data-status="Queued"' in r.text and "Cannot log in" in r.text  # the whole row


@pytest.mark.parametrize("query", ["newest=2147483648", "mark=" + "9" * 30, "mark=-1"])
async def test_a_list_position_past_any_task_id_is_a_clear_400(page_as, world, query) -> None:
    page = await page_as(world.staff)
    r = await page.hx_get(f"/watch?list=tasks&{query}")
    name = query.split("=")[0]
    assert r.status_code == 400 and f"{name}: Input should be" in r.text, r.text
