"""Tasks: the tasks page and panel, one task's row, Export, Cancel and Retry.

The page's watcher (`ui.watch.watcher`, `GET /watch`) follows unfinished rows on the schedule in
`ui.watch.polling`. `GET /tasks/{id}?since=…` for htmx answers one row (its Refresh button, a bookmark),
by `polled_row` alone (a raw handler, ui.watch.polled_route): the row with its watch attributes, or — once
the task has finished — a row without them plus an `HX-Trigger: task-finished` header so the
ticket's reminder box refreshes itself. Without htmx it is a small page (`task_page`).
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse

from desk.core.errors import QuotaExceeded, TaskConflict, ValidationProblem
from desk.core.inputs import optional_id
from desk.core.models import TaskStatus
from desk.reads import tasks as reads
from desk.work import tasks
from ui import i18n, params, task_lists
from ui.params import Declined
from ui.render import fragment_raw, is_htmx, render, row_fragment
from ui.route import UiRoute, redirect
from ui.taskview import TaskView
from ui.tickets_routes import filter_input
from ui.viewer import (
    FragmentViewer,
    PageViewer,
    Viewer,
    fragment_viewer,
    load_teams,
    team_cookie,
    viewer_of,
    zone,
)
from ui.watch.polled_route import PLAIN_ID, ROW, Answer, PolledRoute, answers, header
from web.auth import RuntimeDep, session_secret
from web.edge import Raw
from web.errors import retry_after_headers

router = APIRouter(route_class=UiRoute)

NOT_FILTERS = ("csrf_token", "idempotency_key")
Limit = Annotated[int, Query(ge=1, le=task_lists.PAGE_SIZE)]
# The row's query, declared once for the poll (`polled_row`) and the page (`task_page`).
SINCE = params.Number("since", None, ge=0, real=True)
ROW_PARAMS: dict[str, params.Scalar] = {"since": SINCE}


@router.get("/tasks")
async def tasks_page(
    request: Request,
    rt: RuntimeDep,
    v: FragmentViewer,
    limit: Limit = task_lists.PAGE_SIZE,
    after: str | None = None,
    newer_than: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    """The page; for htmx the list block — or 204 when `newer_than` finds nothing new."""
    team_id = v.require_team()
    unchanged = (
        newer_than is not None
        and is_htmx(request)
        and not await task_lists.anything_newer(rt, v.user_id, team_id, newer_than)
    )
    if unchanged:
        return Response(status_code=204, headers={"Vary": "HX-Request"})
    listing = await task_lists.task_list(rt, v.user_id, team_id, limit=limit, after=after)
    if is_htmx(request):
        return render(request, "tasks.html", {"v": v, "listing": listing}, block="task_list")
    full = await load_teams(rt, v)  # the whole page's header needs the team list
    return render(request, "tasks.html", {"v": full, "listing": listing})


def _finished_headers(row: TaskView) -> dict[str, str]:
    if row.active:
        return {}
    event = {"id": row.id, "kind": row.task.kind, "status": row.label}
    return {"HX-Trigger": json.dumps({"task-finished": event})}


async def task_page(
    request: Request,
    task_id: int,
    rt: RuntimeDep,
    v: FragmentViewer,
    since: Annotated[float | None, SINCE.query()] = SINCE.default,
) -> HTMLResponse:
    """One task as a small page; htmx's row (the polling answer) is `polled_row`'s."""
    row = await task_lists.row(rt, v.user_id, task_id, since, found=v.task)
    full = await load_teams(rt, v)
    return render(request, "task.html", {"v": full, "row": row})


router.add_api_route(
    "/tasks/{task_id}", task_page, methods=["GET"], route_class_override=PolledRoute
)


@answers(ROW)
async def polled_row(request: Request) -> Answer:
    """The htmx row of `GET /tasks/{task_id}`: the session, its user and the task in one
    statement (`desk.reads.tasks.viewer`), the row from the render cache. An unfinished row,
    the polled answer, is made from that read alone (no Viewer: the row shows no team nor
    header); a finished row's trigger and every refusal go by the Viewer (ui.watch.polled_route)."""
    rt = request.app.state.runtime
    raw = request.path_params["task_id"]
    try:
        since = params.read(request.scope, ROW_PARAMS)["since"]
        task_id = optional_id(raw) if PLAIN_ID.fullmatch(raw) else None
        if task_id is None:
            raise Declined
    except Declined:  # an odd spelling: read as a route reads it, after the session
        v = await fragment_viewer(request, rt)  # signed out: to sign in, whatever the query
        task_id = params.path_id(raw)
        since = params.strict(request.scope, ROW_PARAMS)["since"]
        return _htmx_row(request, v, await task_lists.row(rt, v.user_id, task_id, since))
    secret = session_secret(rt, request)
    seen = await reads.viewer(rt.pg, secret, rt.clock(), task_id=task_id) if secret else None
    row = None
    if seen is not None and seen.task is not None and seen.task.task is not None:
        person = seen.person
        row = await task_lists.row(rt, person.id, task_id, since, found=seen.task)
        if row.active:
            locale = i18n.pick(person.locale, header(request.scope, b"accept-language"))
            body, headers = fragment_raw(row_fragment(locale, row, zone(person.timezone)))
            return Raw(200, headers, body)
    v = viewer_of(request, seen, team_cookie(request))  # signed out: LoginRequired
    if row is None:
        row = await task_lists.row(rt, v.user_id, task_id, since, found=v.task)  # NotFound
    return _htmx_row(request, v, row)


def _htmx_row(request: Request, v: Viewer, row: TaskView) -> Answer:
    if row.active:
        body, headers = fragment_raw(row_fragment(v.locale, row, v.tz))
        return Raw(200, headers, body)
    return render(
        request, "tasks.html", {"v": v, "row": row}, block="row", headers=_finished_headers(row)
    )


@router.post("/tasks/{task_id}/cancel")
async def cancel(request: Request, task_id: int, rt: RuntimeDep, v: FragmentViewer) -> Response:
    await tasks.cancel_task(rt, v.user_id, task_id)
    return await _row_answer(request, rt, v, task_id)


@router.post("/tasks/{task_id}/retry")
async def retry(request: Request, task_id: int, rt: RuntimeDep, v: FragmentViewer) -> Response:
    try:
        await tasks.retry_task(rt, v.user_id, task_id)
    except TaskConflict as conflict:  # an identical task started meanwhile: show that one
        task_id = conflict.existing.id
    return await _row_answer(request, rt, v, task_id)


async def _row_answer(request: Request, rt: RuntimeDep, v: Viewer, task_id: int) -> Response:
    row = await task_lists.row(rt, v.user_id, task_id, None)
    if not is_htmx(request):
        return redirect(request, f"/tasks/{task_id}")
    return render(
        request, "tasks.html", {"v": v, "row": row}, block="row", headers=_finished_headers(row)
    )


@router.post("/exports")
async def export(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    """Queue an export of the tickets the form's filters select; answers at once.

    The answer is a message for the button's status area plus the refreshed task list (out of
    band), so the Queued row appears without a reload. An identical active export is followed
    instead of started twice (409, the desk's conflict). The form's idempotency key makes a
    double click or a resent request the same export, even when the first one has finished.
    """
    team_id = v.require_team()
    form = await request.form()
    raw = filter_input({k: form.getlist(k) for k in form if k not in NOT_FILTERS})
    key = str(form.get("idempotency_key") or "") or None
    status, message, task_id, said = 202, "queued", None, None
    headers: dict[str, str] = {}
    asked_at = rt.clock()
    try:
        task = await tasks.create_export(rt, v.user_id, team_id, raw, idempotency_key=key)
        task_id = task.id
        if task.status != TaskStatus.WAITING or task.created_at < asked_at:
            status, message = 200, "replayed"  # made by an earlier send of this very form
    except TaskConflict as conflict:
        status, message, task_id = 409, "attached", conflict.existing.id
    except QuotaExceeded as exc:
        status, message, said = 429, exc.message, exc.text
        headers = retry_after_headers(request, exc)  # when to try again, as the JSON routes say
    except ValidationProblem as exc:
        status, message = 422, exc.message
    listing = await task_lists.task_list(rt, v.user_id, team_id, limit=task_lists.PANEL_SIZE)
    context = {"v": v, "listing": listing, "message": message, "task_id": task_id, "said": said}
    if not is_htmx(request):
        return redirect(request, "/tasks")
    return render(
        request, "tickets.html", context, block="export_result", status=status, headers=headers
    )
