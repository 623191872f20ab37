"""The web's /metrics, parsed with prometheus-client's parser: names, types and labels of the task
counters and histograms, HTTP durations by route template, and a scrape that reads only active
rows of the ledger (an index path, whatever the number of finished rows)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.console import scrape as collector
from desk.core import metrics
from desk.ledger import lanes
from desk.ledger import run as ledger_run
from desk.work import tasks
from jobs import dispatcher, rescuer
from jobs.execution import Execution, execute
from jobs.processors import noop
from tests.telemetry.conftest import label_sets, parse, value

CREATE = """mutation($t: ID!, $q: String) { createExport(teamId: $t, filter: {q: $q}) {
  __typename ... on Task { id } ... on TaskConflict { existingTask { id } } } }"""


async def scrape(api) -> tuple[dict[str, str], dict]:
    r = await api.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return parse(r.text)


async def test_triggers_count_accepted_conflicts_and_quota_refusals(make_api, world):
    async with make_api(export_max_active_per_user=2) as api:
        _, before = await scrape(api)
        first = await api(CREATE, {"t": world.team, "q": "a"}, user=world.staff)
        assert first["data"]["createExport"]["__typename"] == "Task"
        again = await api(CREATE, {"t": world.team, "q": "a"}, user=world.staff)
        assert again["data"]["createExport"]["__typename"] == "TaskConflict"
        await api(CREATE, {"t": world.team, "q": "b"}, user=world.staff)
        refused = await api(CREATE, {"t": world.team, "q": "c"}, user=world.staff)
        assert refused["data"]["createExport"]["__typename"] == "QuotaExceeded"
        types, after = await scrape(api)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("taskdesk_tasks_accepted_total", kind="EXPORT") == 2
    assert delta("taskdesk_task_conflicts_total", kind="EXPORT") == 1
    assert delta("taskdesk_quota_refusals_total", kind="EXPORT") == 1
    for name in (
        "taskdesk_tasks_accepted",
        "taskdesk_tasks_completed",
        "taskdesk_tasks_failed",
        "taskdesk_tasks_cancelled",
        "taskdesk_tasks_rescued",
        "taskdesk_tasks_resent",
        "taskdesk_task_conflicts",
        "taskdesk_quota_refusals",
    ):
        assert types[name] == "counter", name
    for name in (
        "taskdesk_task_start_latency_seconds",
        "taskdesk_task_run_seconds",
        "taskdesk_reminder_lateness_seconds",
        "taskdesk_http_request_duration_seconds",
    ):
        assert types[name] == "histogram", name
    # Active rows by kind and status, and the workers/queue gauges, beside the counters.
    assert value(after, "taskdesk_tasks_active", kind="EXPORT", status="WAITING") == 2
    assert types["taskdesk_workers"] == "gauge" and types["taskdesk_queue_depth"] == "gauge"
    assert value(after, "taskdesk_redis_up") == 1
    assert value(after, "taskdesk_queue_depth") == 2  # both exports sent, no worker running
    assert value(after, "taskdesk_oldest_overdue_seconds") == 0  # injected time stands still


async def test_http_durations_are_labelled_by_route_template_and_status(api):
    _, before = await scrape(api)  # the registry is the process's: other tests count too
    await api.client.get("/tasks/123456/download")
    await api.client.get("/tasks/654321/download")
    await api.client.get("/no/such/page/8f3a")
    _, samples = await scrape(api)
    name = "taskdesk_http_request_duration_seconds_count"
    download = {"method": "GET", "route": "/tasks/{task_id}/download", "status": "401"}
    assert value(samples, name, **download) - value(before, name, **download) == 2
    routes = label_sets(samples, name)
    assert not any("123456" in ls["route"] or "8f3a" in ls["route"] for ls in routes), routes
    assert any(ls["route"] == "<unmatched>" for ls in routes), routes


async def test_task_runs_count_latency_run_time_and_outcomes(rt, world, clock):
    _, before = parse(metrics.generate_latest().decode())
    ok = await tasks.submit_noop(rt, world.staff, world.team)
    flaky = await tasks.submit_noop(rt, world.staff, world.team, {"fail_times": 1})
    doomed = await tasks.submit_noop(rt, world.staff, world.team, {"permanent": True})
    clock.advance(0.3)  # accepted → claimed: 300 ms of injected time

    async def timed(ex: Execution) -> None:
        clock.advance(2)  # two seconds of work
        await noop.process(ex)

    processors = {"NOOP": timed}
    assert await execute(rt, processors, ok.id, ok.run) == "done"
    assert await execute(rt, processors, flaky.id, flaky.run) == "retry"
    assert await execute(rt, processors, doomed.id, doomed.run) == "failed"
    _, after = parse(metrics.generate_latest().decode())

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Each later claim adds 2 s of the previous runs' work to its wait: 0.3, 2.3, 4.3 s.
    assert delta("taskdesk_task_start_latency_seconds_count", kind="NOOP") == 3
    assert delta("taskdesk_task_start_latency_seconds_bucket", kind="NOOP", le="0.25") == 0
    assert delta("taskdesk_task_start_latency_seconds_bucket", kind="NOOP", le="0.5") == 1
    assert delta("taskdesk_task_start_latency_seconds_sum", kind="NOOP") == pytest.approx(6.9)
    assert delta("taskdesk_tasks_completed_total", kind="NOOP") == 1
    assert delta("taskdesk_tasks_retried_total", kind="NOOP") == 1
    assert delta("taskdesk_tasks_failed_total", kind="NOOP") == 1
    for outcome in ("completed", "retry", "failed"):
        labels = {"kind": "NOOP", "outcome": outcome}
        assert delta("taskdesk_task_run_seconds_count", **labels) == 1, outcome
        assert delta("taskdesk_task_run_seconds_sum", **labels) == pytest.approx(2.0), outcome


async def test_the_scrape_reads_active_rows_through_an_index(rt, world):
    """With many finished rows and statistics up to date, the planner must not scan the table."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO background_task (kind, team_id, owner_id, scope_key, status, run_at, "
                " started_at, finished_at, created_at, updated_at, progress, attempts) "
                "SELECT 'NOOP', :t, :o, 'done:' || g, 'COMPLETED', now(), now(), now(), now(), "
                " now(), 1, 1 FROM generate_series(1, 50000) g"
            ),
            {"t": world.team, "o": world.staff},
        )
    async with rt.engine.connect() as plain:
        conn = await plain.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(sa.text("ANALYZE background_task"))
        explain = sa.text("EXPLAIN " + collector.ACTIVE_SQL)
        plan = "\n".join(r[0] for r in await conn.execute(explain, {"now": rt.clock()}))
    assert "Seq Scan" not in plan, plan


async def test_resends_rescues_and_cancels_are_counted(rt, world, clock):
    _, before = parse(metrics.generate_latest().decode())
    unclaimed = await tasks.submit_noop(rt, world.staff, world.team)  # sent by the accept
    clock.advance(rt.settings.redelivery_seconds + 1)
    assert await dispatcher.run_once(rt) == 1  # not claimed in time: sent again
    lost = await tasks.submit_noop(rt, world.staff, world.team)
    assert await ledger_run.claim(rt.pg, lost.id, 1, "e1", now=clock(), lease=timedelta(seconds=5))
    clock.advance(6)
    assert await rescuer.run_once(rt) == 1  # its worker stopped renewing the lease
    await tasks.cancel_task(rt, world.staff, unclaimed.id)
    _, after = parse(metrics.generate_latest().decode())

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("taskdesk_tasks_resent_total", kind="NOOP") == 1
    assert delta("taskdesk_tasks_rescued_total", kind="NOOP") == 1
    assert delta("taskdesk_tasks_cancelled_total", kind="NOOP") == 1
    assert delta("taskdesk_tasks_accepted_total", kind="NOOP") == 2


async def test_lanes_show_their_active_tasks_pause_and_slots(api, rt, world):
    await tasks.submit_noop(rt, world.staff, world.team)
    await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    await lanes.pause(rt, lanes.LONG, None)
    types, samples = await scrape(api)
    assert types["taskdesk_lane_paused"] == "gauge"
    assert value(samples, "taskdesk_lane_paused", lane="long") == 1
    assert value(samples, "taskdesk_lane_paused", lane="short") == 0
    assert value(samples, "taskdesk_lane_tasks_active", lane="short", status="WAITING") == 1
    assert value(samples, "taskdesk_lane_tasks_active", lane="long", status="WAITING") == 1
    assert value(samples, "taskdesk_lane_tasks_active", lane="long", status="RUNNING") == 0
    slots = rt.settings.worker_long_slots
    assert value(samples, "taskdesk_lane_slots_per_worker", lane="long") == slots
