"""The admin "Import tickets" page: the upload form and the team's imports, following themselves.

Submitting stores the upload and starts the import in one transaction
(`desk.imports.service.submit_import`) and answers at once with a message plus the refreshed import
list, so the Queued row appears without a reload. A second submit while an import of the team is still
queued or running attaches to that one (409), as the Export button does. Bad files get their
reason as a 4xx message in the form (too big 413, unreadable 400, empty / not a CSV 422).

Only the team's admins see any of it; anyone else gets exactly what an unknown address answers.
The rules stay in `desk`: this module only reads the upload with a bound on its size.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from desk.core.errors import TaskConflict, ValidationProblem
from desk.core.models import TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.imports import service as imports
from desk.reads import tasks as reads
from desk.reads.tasks import TaskRow
from desk.work import exports
from ui import task_lists
from ui.admin_only import admin_team, as_missing
from ui.render import is_htmx, render
from ui.route import UiRoute, redirect
from ui.tasks_routes import SINCE
from ui.viewer import FragmentViewer, Viewer, load_teams
from ui.watch import polling
from web.auth import RuntimeDep
from web.limits import BodyTooLarge, size_text

router = APIRouter(route_class=UiRoute)

LIST_SIZE = task_lists.PANEL_SIZE
Limit = Annotated[int, Query(ge=1, le=task_lists.PAGE_SIZE)]
TeamId = Annotated[int | None, Query(ge=1)]


class BadUpload(Exception):
    """The request's file cannot be handed to the desk: `outcome` names why (see the template)."""

    def __init__(self, outcome: str, status: int) -> None:
        self.outcome, self.status = outcome, status
        super().__init__(outcome)


async def _listing(rt: Runtime, v: Viewer, team_id: int) -> task_lists.TaskListView:
    return await task_lists.task_list(
        rt, v.user_id, team_id, limit=LIST_SIZE, kind=TaskKind.IMPORT, watch_url="/imports"
    )


def _size_text(n: int) -> str:
    """50 MiB, 512 KiB: the limit as people read it, as every 413 names it (web.limits)."""
    return size_text(n)


async def _page(
    request: Request, rt: Runtime, v: Viewer, team_id: int, *, status: int = 200, **extra: Any
) -> Response:
    """The whole page (with the form's message, when a plain form post went wrong)."""
    listing = await _listing(rt, v, team_id)
    full = v if v.teams else await load_teams(rt, v)
    context = {
        "v": full,
        "listing": listing,
        "team_id": team_id,
        "team_name": next((t.team_name for t in full.teams if t.team_id == team_id), ""),
        "columns": ", ".join(exports.COLUMNS),  # what an export writes is what an import reads
        **await _controls(rt, v, team_id),
        **extra,
    }
    return render(request, "imports.html", context, status=status)


@router.get("/imports")
async def imports_page(
    request: Request,
    rt: RuntimeDep,
    v: FragmentViewer,
    limit: Limit = LIST_SIZE,
    newer_than: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    """The page; for htmx the import list — or 204 when `newer_than` finds nothing new."""
    if not is_htmx(request):
        v = await load_teams(rt, v)  # the header's team list; a stale team cookie is replaced
    if (team_id := await admin_team(rt, v)) is None:
        return await as_missing(request)
    if not is_htmx(request):
        return await _page(request, rt, v, team_id)
    if newer_than is not None and not await task_lists.anything_newer(
        rt, v.user_id, team_id, newer_than, kind=TaskKind.IMPORT
    ):
        return Response(status_code=204, headers={"Vary": "HX-Request"})
    listing = await task_lists.task_list(
        rt, v.user_id, team_id, limit=limit, kind=TaskKind.IMPORT, watch_url="/imports"
    )
    return render(request, "imports.html", {"v": v, "listing": listing}, block="import_list")


async def _read_upload(request: Request, limit: int) -> tuple[str, bytes, str, str | None]:
    """(file name, contents, mode, idempotency key) of the form, reading at most `limit` + 1
    bytes of the file. A body over the import limit stops being read at the limit (web.limits):
    "too big"."""
    try:
        form = await request.form(max_files=1, max_fields=8)
    except BodyTooLarge:
        raise BadUpload("too_big", 413) from None
    except (HTTPException, ClientDisconnect):  # a malformed body (Starlette's 400), or cut off
        raise BadUpload("unreadable", 400) from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile) or not (upload.filename or upload.size):
            raise BadUpload("no_file", 422)
        data = await upload.read(limit + 1)
        if len(data) > limit:
            raise BadUpload("too_big", 413)
        key = str(form.get("idempotency_key") or "") or None
        return upload.filename or "upload.csv", data, str(form.get("mode") or ""), key
    finally:
        await form.close()


async def _active_import(rt: Runtime, user_id: int, team_id: int) -> TaskRow | None:
    """The team's queued or running import, if any: follow it instead of storing another file.
    (Only a shortcut: `start_import`'s conflict is what guarantees one per team.)"""
    for status in (TaskStatus.RUNNING, TaskStatus.WAITING):
        page = await reads.list_tasks(
            rt.pg, user_id, team_id, kind=TaskKind.IMPORT, status=status, first=1
        )
        if page.items:
            return page.items[0]
    return None


async def _controls(
    rt: Runtime, v: Viewer, team_id: int, *, since: float | None = None, busy: bool = True
) -> dict[str, Any]:
    """What the form's controls show: the team's queued or running import and, while there is
    one, when to look again — on the task rows' schedule from `since` (docs/architecture.md,
    "Polling"), None after ten minutes of watching (a Refresh button instead)."""
    active = await _active_import(rt, v.user_id, team_id) if busy else None
    watch_from, delay = polling.watched(since, rt.clock().timestamp())
    return {
        "team_id": team_id,
        "busy": active,
        "since": watch_from,
        "delay": delay if active is not None else None,
        "limit": _size_text(rt.settings.import_max_bytes),
    }


async def _start(rt: Runtime, v: Viewer, team_id: int, request: Request) -> tuple[str, int]:
    """("queued" | "attached" | "replayed", task id); raises BadUpload or the desk's
    ValidationProblem."""
    filename, data, mode, key = await _read_upload(request, rt.settings.import_max_bytes)
    imports.sniff(data, rt.settings.import_max_bytes)  # a bad file says so, running import or not
    existing = await _active_import(rt, v.user_id, team_id)
    if existing is not None:
        return "attached", existing.id or 0
    asked_at = rt.clock()
    try:
        task = await imports.submit_import(
            rt, v.user_id, team_id, filename, data, mode, idempotency_key=key
        )
    except TaskConflict as conflict:  # started meanwhile (a double click, another tab)
        return "attached", conflict.existing.id
    if task.status != TaskStatus.WAITING or task.created_at < asked_at:
        return "replayed", task.id or 0  # this very form was sent before (a resend)
    return "queued", task.id or 0


@router.post("/imports")
async def start_import(
    request: Request, rt: RuntimeDep, v: FragmentViewer, team_id: TeamId = None
) -> Response:
    """Store the file and queue its import; the answer is a message and the refreshed list.

    The team is the one the form was shown for (`?team_id=`), not whichever team another tab
    switched to since: an import writes many tickets, so it goes where the admin saw it going.
    """
    if (team := await admin_team(rt, v, team_id)) is None:
        return await as_missing(request)
    status, extra = 202, {}
    try:
        outcome, task_id = await _start(rt, v, team, request)
        status = {"queued": 202, "replayed": 200}.get(outcome, 409)
        extra = {"outcome": outcome, "task_id": task_id}
    except BadUpload as bad:
        status, extra = bad.status, {"outcome": bad.outcome}
    except ValidationProblem as problem:
        status, extra = problem.http_status, {"outcome": "problem", "problem": problem}
    if not is_htmx(request):
        if status in (200, 202, 409):
            return redirect(request, "/imports")
        return await _page(request, rt, v, team, status=status, **extra)
    started = status in (200, 202, 409)
    context = {
        "v": v,
        "refreshed": await _listing(rt, v, team) if started else None,
        # The form's controls wait for the import just started (swapped in out of band).
        **await _controls(rt, v, team, busy=started),
        "oob": True,
        **extra,
    }
    return render(request, "imports.html", context, block="import_result", status=status)


@router.get("/imports/controls")
async def import_controls(
    request: Request,
    rt: RuntimeDep,
    v: FragmentViewer,
    team_id: TeamId = None,
    since: Annotated[float | None, SINCE.query()] = SINCE.default,
) -> Response:
    """The form's controls: disabled with "Import #7 is running (42 %)" while one is active."""
    if (team := await admin_team(rt, v, team_id)) is None:
        return await as_missing(request)
    context = {"v": v, **await _controls(rt, v, team, since=since)}
    return render(request, "imports.html", context, block="import_controls")
