"""The console's tasks: a search by kind, status, team, person, time and error text (live on
its first page), and a task's page — its ledger row, the story from the task event log, the
console actions taken on it — with audited Retry and Cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from desk.console import failures, health, task_admin
from desk.console import overview as console
from desk.core.errors import ValidationProblem
from desk.core.models import ACTIVE_STATUSES, BackgroundTask, TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.ledger import events
from desk.people import audit
from ui.console.pages import live_url, page_context, page_or_live, stream_url
from ui.console.route import ConsoleDep, ConsoleRoute
from ui.route import redirect
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)

FILTER_KEYS = ("kind", "status", "team", "person", "since", "until", "error")


@router.get("/ops/tasks")
async def tasks_page(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    before: Annotated[int | None, Query(ge=1)] = None,
    watch: Annotated[float | None, Query(ge=0)] = None,
) -> Response:
    raw = {k: request.query_params.get(k, "") for k in FILTER_KEYS}
    problem: ValidationProblem | None = None
    try:
        f = console.parse_filters(raw, c.v.tz)
    except ValidationProblem as exc:
        f, problem = console.Filters(), exc
    rows = [] if problem else await console.search(rt, c.scope, f, before=before)
    url, delay = live_url(request, watch, f.query())
    context = page_context(
        c,
        request,
        f=f,
        raw=raw,
        problem=problem,
        rows=rows,
        before=before,
        next_before=rows[-1].task.id if len(rows) == console.PAGE else None,
        teams=await console.teams(rt, c.scope),
        kinds=[k.value for k in TaskKind],
        statuses=[s.value for s in TaskStatus],
        live_url=None if before or problem else url,  # only the newest page follows by itself
        live_stream=stream_url(team=f.team_id, kind=f.kind),
        delay=delay,
        query=f.query(),
    )
    return page_or_live(request, "console/tasks.html", context, status=422 if problem else 200)


@router.get("/ops/tasks/{task_id}")
async def task_page(
    request: Request,
    task_id: int,
    rt: RuntimeDep,
    c: ConsoleDep,
    watch: Annotated[float | None, Query(ge=0)] = None,
) -> Response:
    found = await console.task_in_scope(rt, c.scope, task_id)
    story = await events.story(rt, task_id)
    actions = await audit.recent(
        rt, operator=c.scope.operator, team_ids=c.scope.team_ids, task_id=task_id
    )
    diagnosis = await _diagnosis(rt, found.task)
    url, delay = live_url(request, watch)
    context = page_context(
        c,
        request,
        found=found,
        t=found.task,
        story=story,
        actions=actions,
        diagnosis=diagnosis,
        live_url=url if found.task.status in ACTIVE_STATUSES else None,
        live_stream=stream_url(task=task_id),
        delay=delay,
    )
    return page_or_live(request, "console/task.html", context)


async def _diagnosis(rt: Runtime, task: BackgroundTask) -> str | None:
    """One sentence on why an unfinished task is where it is (a paused lane first)."""
    if task.status not in (TaskStatus.WAITING, TaskStatus.RUNNING):
        return None
    return await task_admin.diagnosis(rt, task, await health.check(rt))


@router.post("/ops/tasks/{task_id}/retry")
async def retry(request: Request, task_id: int, rt: RuntimeDep, c: ConsoleDep) -> Response:
    await failures.retry_task(rt, c.scope, task_id)
    return redirect(request, f"/ops/tasks/{task_id}")


@router.post("/ops/tasks/{task_id}/cancel")
async def cancel(request: Request, task_id: int, rt: RuntimeDep, c: ConsoleDep) -> Response:
    await failures.cancel_task(rt, c.scope, task_id)
    return redirect(request, f"/ops/tasks/{task_id}")
