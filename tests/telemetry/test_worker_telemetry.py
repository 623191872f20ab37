"""A real worker process with WORKER_METRICS_PORT and LOG_FORMAT=json: after it runs a task, its
own scrape (parsed with prometheus-client) counts the task, and its stderr holds one JSON object
per line, the task's lines carrying task_id, run, execution_id, kind, team_id and worker_id."""

from __future__ import annotations

import json

import httpx
import pytest

from desk.core.clock import utcnow
from desk.work import tasks
from tests.helpers import free_port, running_workers, wait_for
from tests.telemetry.conftest import label_sets, parse, value

pytestmark = pytest.mark.slow


async def test_worker_serves_its_metrics_and_writes_json_lines(rt, world, settings, tmp_path):
    rt.clock = utcnow  # the worker process runs on real time
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    with running_workers(settings, tmp_path, worker_metrics_port=port, log_format="json") as (
        worker,
    ):
        async with httpx.AsyncClient(timeout=5) as client:

            async def scrape() -> str | None:
                try:
                    r = await client.get(url)
                except httpx.TransportError:
                    return None
                return r.text if r.status_code == 200 else None

            await wait_for(scrape, timeout=60, what=f"the worker's metrics on {url}")
            task = await tasks.submit_noop(rt, world.staff, world.team, {"steps": 1})

            async def done() -> bool:
                t = await tasks.get_task(rt, world.staff, task.id)
                return t.status == "COMPLETED"

            await wait_for(done, timeout=60, what="the task to complete")

            async def counted() -> dict | None:
                text = await scrape()
                samples = parse(text)[1] if text else {}
                hit = value(samples, "taskdesk_tasks_completed_total", kind="NOOP") >= 1
                return samples if hit else None

            samples = await wait_for(counted, timeout=20, what="the completion in the scrape")
            assert (await client.get(url.replace("/metrics", "/nope"))).status_code == 404
        log_text = worker.log()
    assert value(samples, "taskdesk_task_start_latency_seconds_count", kind="NOOP") >= 1
    assert value(samples, "taskdesk_task_run_seconds_count", kind="NOOP", outcome="completed") >= 1
    (slots,) = label_sets(samples, "taskdesk_worker_slots")
    assert (
        value(samples, "taskdesk_worker_slots", **slots)
        == settings.worker_max_jobs + settings.worker_long_slots
    )

    records = [json.loads(line) for line in log_text.splitlines() if line.strip()]
    mine = [r for r in records if r.get("task_id") == task.id]
    events = {r.get("event"): r for r in mine}
    assert {"claimed", "completed"} <= events.keys(), mine
    for event in ("claimed", "completed"):
        rec = events[event]
        assert rec["run"] == 1 and rec["kind"] == "NOOP" and rec["team_id"] == world.team
        assert rec["worker_id"] == slots["worker"], rec
        assert len(rec["execution_id"]) == 32, rec
    assert events["claimed"]["execution_id"] == events["completed"]["execution_id"]


async def test_a_taken_metrics_port_costs_the_metrics_not_the_worker(settings, caplog):
    from desk.core import metrics

    taken = await metrics.start_worker(
        settings.model_copy(update={"worker_metrics_port": free_port()}), "w-a", lambda: 0
    )
    assert taken is not None
    port = taken.sockets[0].getsockname()[1]
    try:
        second = await metrics.start_worker(
            settings.model_copy(update={"worker_metrics_port": port}), "w-b", lambda: 0
        )
        assert second is None
        assert f"port {port} unavailable" in caplog.text
    finally:
        taken.close()
        await taken.wait_closed()
