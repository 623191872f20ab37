"""A task's story from the event log, with real worker processes: each send, each claim with
the worker and execution id, each error with its attempt, progress and the finish; and a worker
killed mid-task listed as vanished, with what the rescuer took back from it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from desk.console import health
from desk.core.clock import utcnow
from desk.ledger import events
from desk.work import tasks
from tests.console.conftest import HTML
from tests.helpers import WorkerProcess, running_workers, wait_for

pytestmark = pytest.mark.slow  # starts real worker or server processes


def _status(rt, task_id: int, wanted: str):
    async def probe():
        async with rt.engine.connect() as conn:
            status = (
                await conn.execute(
                    sa.text("SELECT status FROM background_task WHERE id = :i"), {"i": task_id}
                )
            ).scalar()
        return status == wanted

    return probe


async def _worker_ids(rt) -> list[str]:
    return [str(w["id"]) for w in (await health.check(rt)).workers]


async def test_the_story_of_a_task_that_failed_once(
    page_as, rt, world, settings, tmp_path, operator
):
    rt.clock = utcnow
    env = {"retry_base_seconds": 0.2, "retry_max_seconds": 0.5}
    with running_workers(settings, tmp_path, **env):
        [worker_id] = await wait_for(lambda: _worker_ids(rt), timeout=30, what="a worker")
        task = await tasks.submit_noop(
            rt, world.staff, world.team, {"fail_times": 1, "steps": 10, "step_seconds": 0.02}
        )
        await wait_for(_status(rt, task.id, "COMPLETED"), timeout=30, what="task completed")
    story = await events.story(rt, task.id)
    names = [e.event for e in story]
    assert names[0] == "accepted" and names[-1] == "completed"
    claims = [e for e in story if e.event == "claimed"]
    assert [(c.attempt, c.run, c.worker_id) for c in claims] == [
        (1, 1, worker_id),
        (2, 2, worker_id),
    ]
    assert len({c.execution_id for c in claims}) == 2 and all(c.execution_id for c in claims)
    [error] = [e for e in story if e.event == "error"]
    assert error.attempt == 1 and "scripted failure on attempt 1" in error.detail
    assert error.execution_id == claims[0].execution_id and error.worker_id == worker_id
    assert names.index("error") < names.index("claimed", names.index("error"))
    assert "sent" in names[1 : names.index("claimed")]  # each round is sent before its claim
    assert names.count("progress") >= 1
    assert [e.at for e in story] == sorted(e.at for e in story)
    page = await (await page_as(operator)).get(f"/ops/tasks/{task.id}", headers=HTML)
    assert page.text.count('data-event="claimed"') == 2 and worker_id in page.text


async def test_a_killed_worker_is_listed_with_what_was_rescued_from_it(
    page_as, rt, world, settings, tmp_path, operator
):
    rt.clock = utcnow
    env = {"lease_seconds": 2, "heartbeat_ttl_seconds": 3}
    first = WorkerProcess(settings, tmp_path / "first.log", **env)
    try:
        [dead] = await wait_for(lambda: _worker_ids(rt), timeout=30, what="first worker")
        task = await tasks.submit_noop(
            rt, world.staff, world.team, {"steps": 40, "step_seconds": 0.05}
        )
        await wait_for(_status(rt, task.id, "RUNNING"), timeout=30, what="task running")
        first.kill()
    finally:
        first.stop()
    with running_workers(settings, tmp_path, **env):
        await wait_for(_status(rt, task.id, "COMPLETED"), timeout=60, what="rescued and done")
        page = await page_as(operator)
        text = (await page.get("/ops/workers", headers=HTML)).text
        live = await _worker_ids(rt)
    assert dead not in live
    vanished = text.split('data-testid="vanished"', 1)[1]
    assert f'data-worker="{dead}"' in vanished
    assert f'href="/ops/tasks/{task.id}"' in vanished.split("</li>", 1)[0]
    assert f'data-worker="{live[0]}"' in text.split('data-testid="vanished"', 1)[0]
    story = [e.event for e in await events.story(rt, task.id)]
    assert story.index("rescued") < len(story) - 1 and story[-1] == "completed"
