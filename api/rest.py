"""The REST JSON API under /api/v1: the trigger contract for scripts and curl.

Start an export or an import (202 `{task_id, status: "queued"}`; a repeat while one is active
for the scope: 409 with that task's `task_id` and `status`), read a task (one indexed read), list
a team's tasks. The same desk services as GraphQL and the pages, so the same rules: visibility
(a task or team you may not see is 404 exactly like a missing one), quotas, one active task per
scope, idempotency keys (the `Idempotency-Key` header). Callers sign in with an API token
(`Authorization: Bearer …`) or the session cookie; a cookie's writes need its CSRF token
(`X-CSRF-Token`). Errors are `{"error": {code, message[, field, task_id]}}` (web/errors.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from api.forms import CSV_FILE, csv_part, only_fields
from api.openapi import ERRORS, PLAIN_TEXT, multipart
from desk.core.errors import NotFound, TaskConflict, Unauthenticated, ValidationProblem
from desk.core.runtime import Runtime
from desk.helpdesk.filters import MAX_Q
from desk.imports import service as imports
from desk.ledger import rules
from desk.reads import lookups
from desk.reads import tasks as reads
from desk.work import tasks
from web.auth import Caller, RuntimeDep, get_runtime, identify
from web.csrf import require_csrf
from web.limits import BodyTooLarge

PREFIX = "/api/v1"
router = APIRouter(prefix=PREFIX, tags=["api v1"])

Status = Literal["queued", "scheduled", "running", "succeeded", "failed", "cancelled"]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=r"^[A-Za-z0-9_.:-]{8,100}$",
        description="Makes a retry safe: the same key (8 to 100 of A-Z a-z 0-9 _ . : -) within "
        "a few minutes answers with the task it first started, even a finished one.",
    ),
]


class TaskOut(BaseModel):
    task_id: int
    kind: str = Field(description="EXPORT, IMPORT or REMINDER")
    status: Status
    progress: float = Field(description="0 to 1")
    message: str = Field(description="Progress while running, the error of a retry or failure, "
                         "else the summary")  # fmt: skip
    result_summary: str | None
    download_url: str | None = Field(description="A completed export's CSV, for its owner only")
    label: str = Field(description="What the pages show: Queued, Retrying, Worker lost, …")
    team_id: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    expires_at: datetime | None


class TaskPageOut(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None = Field(
        description="Pass as `after` for the next page; null at the end"
    )


class Started(BaseModel):
    task_id: int
    status: Status


StatusName = Literal["OPEN", "PENDING", "RESOLVED", "CLOSED"]
PriorityName = Literal["LOW", "NORMAL", "HIGH", "URGENT"]
# The rule between the two assignment fields, in the document too (JSON Schema `if`/`then`), so
# a generated client knows it: `assignment: "user"` needs `assignee_id`, and `assignee_id` goes
# only with `assignment: "user"` (or alone, which means the same).
_ASSIGNEE_RULE: dict[str, Any] = {
    "allOf": [
        {
            "if": {"properties": {"assignment": {"const": "user"}}, "required": ["assignment"]},
            "then": {"properties": {"assignee_id": {"type": "integer"}},
                     "required": ["assignee_id"]},
        },
        {
            "if": {"properties": {"assignee_id": {"type": "integer"}},
                   "required": ["assignee_id"]},
            "then": {"properties": {"assignment": {"enum": ["user", None]}}},
        },
    ]
}  # fmt: skip


class ExportIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_ASSIGNEE_RULE)

    team_id: Annotated[int, Field(ge=1, le=lookups.MAX_ID)]
    status: list[StatusName] | StatusName | None = None
    priority: list[PriorityName] | PriorityName | None = None
    assignment: Literal["anyone", "me", "unassigned", "user"] | None = Field(
        None, description="anyone (the default), me, unassigned, or user with assignee_id"
    )
    assignee_id: int | None = Field(
        None, ge=1, le=lookups.MAX_ID, description="with assignment=user (or alone: the same)"
    )
    q: str | None = Field(
        None, max_length=MAX_Q, pattern=PLAIN_TEXT, description="the title or a message contains"
    )

    def filters(self) -> dict[str, Any]:
        """The plain form desk.helpdesk.filters.parse_filter validates (as GraphQL's input)."""
        raw = self.model_dump(exclude={"team_id"}, exclude_none=True)
        for many in ("status", "priority"):
            if isinstance(raw.get(many), str):
                raw[many] = [raw[many]]
        if self.assignee_id is not None and self.assignment is None:
            raw["assignment"] = "user"
        return raw


def task_json(t: Any, now: datetime, viewer_id: int) -> dict[str, Any]:
    """A task `viewer_id` may see, in the contract's words (`rules.contract_status`)."""
    downloadable = rules.export_downloadable(t, viewer_id, now)
    return {
        "task_id": t.id,
        "kind": t.kind,
        "status": rules.contract_status(t, now),
        "progress": t.progress,
        "message": rules.contract_message(t),
        "result_summary": t.result_summary,
        "download_url": f"/tasks/{t.id}/download" if downloadable else None,
        "label": rules.status_label(t, now),
        "team_id": t.team_id,
        "created_at": t.created_at.isoformat(),
        "started_at": t.started_at.isoformat() if t.started_at else None,
        "finished_at": t.finished_at.isoformat() if t.finished_at else None,
        "expires_at": t.expires_at.isoformat() if t.expires_at else None,
    }


async def caller_of(rt: Runtime, request: Request, *, write: bool) -> Caller:
    caller = await identify(rt, request)
    if caller is None:
        raise Unauthenticated()
    if write and caller.via == "cookie":
        await require_csrf(rt, request)
    return caller


def _started(rt: Runtime, start: Any) -> JSONResponse:
    body = {"task_id": start.id, "status": rules.contract_status(start, rt.clock())}
    headers = {"Location": f"{PREFIX}/tasks/{start.id}"}
    return JSONResponse(body, status_code=202, headers=headers)


def _conflict(rt: Runtime, exc: TaskConflict) -> JSONResponse:
    """409 with the active task to follow instead (its id and status at the top level)."""
    existing = exc.existing
    body = {
        "task_id": existing.id,
        "status": rules.contract_status(existing, rt.clock()),
        "error": {"code": exc.code, "message": exc.message, "task_id": existing.id},
    }
    headers = {"Location": f"{PREFIX}/tasks/{existing.id}"}
    return JSONResponse(body, status_code=409, headers=headers)


_STARTED: dict[int | str, dict[str, Any]] = {
    202: {"model": Started, "description": "Queued; follow it at the Location header"},
    409: {"description": "One is already active for this scope: `{task_id, status, error}`"},
}


@router.post("/exports", status_code=202, response_model=Started, responses=_STARTED)
async def start_export(
    body: ExportIn, request: Request, rt: RuntimeDep, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    """Export the team's tickets matching the filters to CSV (a customer: only their own)."""
    caller = await caller_of(rt, request, write=True)
    try:
        row = await tasks.create_export(
            rt, caller.user_id, body.team_id, body.filters(), idempotency_key=idempotency_key
        )
    except TaskConflict as exc:
        return _conflict(rt, exc)
    except ValidationProblem as exc:
        if exc.field == "assignee_id" and body.assignee_id is not None:
            # An id naming nobody on the team's staff: as a missing resource, the answer a
            # schema-valid request referring to something absent gets (not a value's format).
            raise NotFound(
                "Member not found: assignee_id names nobody on this team's staff."
            ) from None
        raise
    return _started(rt, row)


_IMPORT_FORM = {
    "file": CSV_FILE,
    "team_id": {"type": "integer", "minimum": 1, "maximum": lookups.MAX_ID},
    "mode": {"type": "string", "enum": ["create", "upsert"], "default": "create"},
}


@router.post(
    "/imports",
    status_code=202,
    response_model=Started,
    responses=_STARTED | ERRORS.write_file,
    openapi_extra=multipart(_IMPORT_FORM, required=["file", "team_id"]),
)
async def start_import(
    request: Request, rt: RuntimeDep, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    """Import a CSV of tickets into the team (admins; one import per team at a time).
    Multipart fields: `file` (the CSV), `team_id`, `mode` (create or upsert)."""
    caller = await caller_of(rt, request, write=True)
    limit = rt.settings.import_max_bytes
    form = await request.form(max_files=1, max_fields=8, max_part_size=limit + 1)
    only_fields(form, _IMPORT_FORM)
    upload, team_id, mode = form.get("file"), form.get("team_id"), form.get("mode") or "create"
    if not isinstance(mode, str):
        raise ValidationProblem("mode", "create or upsert")
    team = lookups.require_id(team_id, "Team")
    data, name = await csv_part(upload, limit)
    if len(data) > limit:
        raise BodyTooLarge(limit, "An import file")
    try:
        row = await imports.submit_import(
            rt, caller.user_id, team, name, data, mode, idempotency_key=idempotency_key,
            header=False,
        )  # fmt: skip
    except TaskConflict as exc:
        return _conflict(rt, exc)
    return _started(rt, row)


@router.get("/tasks/{task_id}", response_model=TaskOut)
async def get_task(task_id: str, request: Request) -> JSONResponse:
    """One task's state: one indexed read (with the session's, for a cookie). 404 when it is
    missing or not yours to see, alike."""
    # The runtime without a dependency: scripts poll this read, and solving one costs about a
    # tenth of its CPU (bench status-read rest).
    rt = get_runtime(request)
    wanted = lookups.require_id(task_id, "Task")
    caller = await identify(rt, request, task_id=wanted)
    if caller is None:
        raise Unauthenticated()
    hit = (
        caller.task if caller.task is not None else await reads.task(rt.pg, caller.user_id, wanted)
    )
    if hit.task is None:
        raise NotFound("Task not found.")
    return JSONResponse(task_json(hit.task, rt.clock(), caller.user_id))


@router.get("/tasks", response_model=TaskPageOut)
async def list_tasks(
    request: Request,
    rt: RuntimeDep,
    team_id: Annotated[str, Query(description="the team's id")],
    kind: Annotated[Literal["EXPORT", "IMPORT", "REMINDER"] | None, Query()] = None,
    first: Annotated[int, Query(ge=1, le=reads.MAX_PAGE)] = 20,
    after: Annotated[str | None, Query(max_length=20, description="next_cursor")] = None,
) -> JSONResponse:
    """A team's tasks you may see, newest first, a page at a time. 404 for a team you are not
    in, as for a missing one."""
    caller = await caller_of(rt, request, write=False)
    team = lookups.require_id(team_id, "Team")
    page = await reads.list_tasks(rt.pg, caller.user_id, team, kind=kind, first=first, after=after)
    now = rt.clock()
    items = [task_json(t, now, caller.user_id) for t in page.items]
    return JSONResponse({"items": items, "next_cursor": page.end_cursor if page.has_next else None})
