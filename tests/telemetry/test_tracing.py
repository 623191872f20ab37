"""OpenTelemetry: with tracing on (the SDK's in-memory exporter), a task's message carries the
trace context and the worker's claim/run/finish spans join the request that accepted it; with
OTEL_EXPORTER_OTLP_ENDPOINT unset, messages stay `{task_id, run}` and nothing is imported."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from arq.constants import job_key_prefix

from desk.core import tracing
from desk.core.queue import job_id
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.ledger import lanes
from desk.work import tasks
from jobs.processors import registry
from jobs.worker import Lane, process_task
from tests.helpers import ROOT, settings_env


@pytest.fixture
def spans(settings: Settings) -> Iterator[Any]:
    """The SDK's in-memory exporter (the dev group installs the SDK; skipped without it)."""
    memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = memory.InMemorySpanExporter()
    assert tracing.setup(settings, "taskdesk-test", exporter=exporter)
    yield exporter
    tracing.setup(settings, "off")  # no endpoint: tracing off again


async def queued_message(rt: Runtime, task_id: int, run: int) -> dict[str, Any]:
    raw = await rt.redis.get(job_key_prefix + job_id(rt.settings.queue_prefix, task_id, run, 1))
    assert raw is not None, "the task was not enqueued"
    args = json.loads(raw)["a"]
    assert isinstance(args[0], dict)
    return args[0]


async def run_like_arq(rt: Runtime, msg: dict[str, Any]) -> str:
    """arq runs each job in an asyncio task of its own; so does this. The job claims the task
    and starts the work detached from arq, in the lane: wait for that work's result too."""
    lane = Lane(rt, lanes.lane_of("NOOP"), registry())
    assert await asyncio.create_task(process_task({"lane": lane}, msg)) == "started"
    (work,) = lane.works()
    return await work


async def test_worker_spans_join_the_request_that_accepted_the_task(rt, world, spans):
    with tracing.span("HTTP POST /graphql") as request:
        task = await tasks.submit_noop(rt, world.staff, world.team)
    msg = await queued_message(rt, task.id, task.run)
    assert set(msg) == {"task_id", "run", "tp"}
    trace_id = request.get_span_context().trace_id
    assert msg["tp"].split("-")[1] == f"{trace_id:032x}"

    assert await run_like_arq(rt, msg) == "done"
    finished = {s.name: s for s in spans.get_finished_spans()}
    expected = {"taskdesk.accept", "taskdesk.dispatch", "taskdesk.claim", "taskdesk.run"}
    assert expected | {"taskdesk.finish"} <= finished.keys()
    assert {s.context.trace_id for s in finished.values()} == {trace_id}
    # The worker's claim hangs under the send that carried its message.
    assert (
        finished["taskdesk.claim"].parent.span_id == finished["taskdesk.dispatch"].context.span_id
    )
    assert finished["taskdesk.finish"].parent.span_id == finished["taskdesk.run"].context.span_id
    assert finished["taskdesk.claim"].attributes["taskdesk.task_id"] == task.id


async def test_tracing_off_leaves_messages_alone(rt, world):
    assert not tracing.enabled()
    task = await tasks.submit_noop(rt, world.staff, world.team)
    assert await queued_message(rt, task.id, task.run) == {"task_id": task.id, "run": 1}


def test_nothing_of_opentelemetry_is_loaded_when_unset(settings: Settings) -> None:
    code = (
        "import sys, api.app, jobs.worker\n"
        "from desk.core import tracing\n"
        "from desk.core.settings import load_settings\n"
        "assert not tracing.setup(load_settings(), 'x')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))\n"
    )
    env = settings_env(settings) | {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
