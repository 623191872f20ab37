"""The conversation over REST (docs/rest.md, "Conversation"): a ticket's messages and history,
posting a reply or (staff) a note with files, and the two-step upload GraphQL's
`replyToTicket(attachmentIds)` uses.

The rules are desk.work.conversation's, as for GraphQL and the pages: a ticket, message or file
you may not see answers 404 exactly like a missing one; a customer never sees a note, its files,
or that it exists.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException

from api.forms import only_fields
from api.openapi import ERRORS, multipart
from api.rest import PREFIX, caller_of
from desk.core.errors import NotFound, TooLarge, ValidationProblem
from desk.helpdesk import attachments, thread
from desk.helpdesk.attachments import Attachment
from desk.reads import conversation as reads
from desk.reads import lookups, threads
from desk.reads.threads import MessageView
from desk.work import conversation
from web.auth import RuntimeDep
from web.errors import too_many_file_parts

router = APIRouter(prefix=PREFIX, tags=["conversation"])

StatusIn = Literal["OPEN", "PENDING", "RESOLVED", "CLOSED"]


class AttachmentOut(BaseModel):
    attachment_id: int
    filename: str
    content_type: str = Field(description="Sniffed from the bytes, not taken from the sender")
    size: int
    download_url: str = Field(description="GET it with the same token or cookie")


class DeliveryOut(BaseModel):
    task_id: int = Field(description="The EMAIL task: follow it at /api/v1/tasks/{task_id}")
    recipient_name: str
    state: Literal["sending", "delivered", "retrying", "failed", "cancelled"]
    reply: str | None = Field(description="The mail server's last answer, when it refused")
    attempts: int


class MessageOut(BaseModel):
    message_id: int
    ticket_id: int
    author_id: int | None
    author_name: str | None
    internal: bool = Field(description="A staff note (never shown to customers)")
    body: str = Field(description="Plain text; empty once redacted")
    created_at: datetime
    redacted_at: datetime | None
    attachments: list[AttachmentOut]
    deliveries: list[DeliveryOut] = Field(description="Its e-mails (staff only; else empty)")


class MessagePageOut(BaseModel):
    items: list[MessageOut] = Field(description="Oldest first")
    next_cursor: str | None = Field(description="Pass as `after` for the next page")


class ChangeOut(BaseModel):
    change_id: int
    actor_id: int | None
    at: datetime
    field: Literal["status", "priority", "assignee", "title"]
    old_value: str | None = Field(description="An assignee as the user's id; null for nobody")
    new_value: str | None


class HistoryPageOut(BaseModel):
    items: list[ChangeOut] = Field(description="Oldest first")
    next_cursor: str | None


class PostedOut(BaseModel):
    message: MessageOut
    ticket_status: str = Field(description="The ticket's status after the post")
    email_task_ids: list[int] = Field(description="The e-mails the post queued (none for a note)")


class MessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    body: str = Field(
        "", max_length=thread.MAX_BODY, description="Plain text; may be empty with files"
    )
    internal: bool = Field(False, description="A note for staff only (staff and admins)")
    set_status: StatusIn | None = Field(None, description="Staff: set the status in the same step")
    attachment_ids: list[Annotated[int, Field(ge=1, le=lookups.MAX_ID)]] = Field(
        default_factory=list, max_length=100, description="Your uploads from POST /api/v1/uploads"
    )


class UploadOut(BaseModel):
    attachment_id: int = Field(description="Send it in `attachment_ids` (or GraphQL's)")
    filename: str
    content_type: str
    size: int


def file_json(a: Attachment) -> dict[str, Any]:
    return {
        "attachment_id": a.id,
        "filename": a.filename,
        "content_type": a.content_type,
        "size": a.size,
        "download_url": f"/attachments/{a.id}",
    }


def message_json(v: MessageView, names: dict[int, str]) -> dict[str, Any]:
    m = v.message
    return {
        "message_id": m.id,
        "ticket_id": m.ticket_id,
        "author_id": m.author_id,
        "author_name": names.get(m.author_id) if m.author_id is not None else None,
        "internal": m.internal,
        "body": m.body,
        "created_at": m.created_at.isoformat(),
        "redacted_at": m.redacted_at.isoformat() if m.redacted_at else None,
        "attachments": [file_json(a) for a in v.files],
        "deliveries": [delivery_json(d) for d in v.deliveries],
    }


def delivery_json(d: Any) -> dict[str, Any]:
    return {
        "task_id": d.task_id,
        "recipient_name": d.recipient_name,
        "state": d.state,
        "reply": d.reply,
        "attempts": d.attempts,
    }


async def _names(rt: Any, views: list[MessageView]) -> dict[int, str]:
    async with rt.engine.connect() as conn:
        ids = {v.message.author_id for v in views if v.message.author_id is not None}
        return await reads.names_of(conn, ids)


def _cursor(after: str | None) -> int | None:
    if after is None:
        return None
    found = lookups.parse_id(after)
    if found is None:
        raise ValidationProblem("after", "a next_cursor from the previous page")
    return found


First = Annotated[int, Query(ge=1, le=thread.MAX_PAGE)]
After = Annotated[str | None, Query(max_length=20, description="next_cursor")]


@router.get("/tickets/{ticket_id}/messages", response_model=MessagePageOut, responses=ERRORS.read)
async def list_messages(
    ticket_id: str, request: Request, rt: RuntimeDep, first: First = 50, after: After = None
) -> JSONResponse:
    """The thread, oldest first: public messages, and for staff the notes, with files and (for
    staff) their e-mails' delivery states."""
    caller = await caller_of(rt, request, write=False)
    wanted = lookups.require_id(ticket_id, "Ticket")
    found = await threads.windows(rt, caller.user_id, [wanted], first=first, after=_cursor(after))
    if wanted not in found:
        raise NotFound("Ticket not found.")
    page = found[wanted].page
    names = await _names(rt, page.items)
    items = [message_json(v, names) for v in page.items]
    last = str(page.items[-1].message.id) if page.has_next and page.items else None
    return JSONResponse({"items": items, "next_cursor": last})


@router.get("/tickets/{ticket_id}/history", response_model=HistoryPageOut, responses=ERRORS.read)
async def list_history(
    ticket_id: str, request: Request, rt: RuntimeDep, first: First = 50, after: After = None
) -> JSONResponse:
    """Every change of status, priority, assignee and title: who, when, from → to."""
    caller = await caller_of(rt, request, write=False)
    wanted = lookups.require_id(ticket_id, "Ticket")
    found = await threads.histories(rt, caller.user_id, [wanted], first=first, after=_cursor(after))
    if wanted not in found:
        raise NotFound("Ticket not found.")
    page = found[wanted]
    items = [change_json(c) for c in page.items]
    last = str(page.items[-1].id) if page.has_next and page.items else None
    return JSONResponse({"items": items, "next_cursor": last})


def change_json(c: thread.Change) -> dict[str, Any]:
    return {
        "change_id": c.id,
        "actor_id": c.actor_id,
        "at": c.at.isoformat(),
        "field": c.field,
        "old_value": c.old_value,
        "new_value": c.new_value,
    }


_MESSAGE_FORM = {
    "body": {"type": "string", "maxLength": thread.MAX_BODY},
    "internal": {"type": "boolean"},
    "set_status": {"type": "string", "enum": ["OPEN", "PENDING", "RESOLVED", "CLOSED"]},
    "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
}


@router.post(
    "/tickets/{ticket_id}/messages",
    status_code=201,
    response_model=PostedOut,
    responses=ERRORS.write_file,
    openapi_extra=multipart(_MESSAGE_FORM, json_model=MessageIn),
)
async def post_message(ticket_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """A public reply, or with `internal` a staff note, on a ticket you may see: JSON (with
    `attachment_ids` from POST /api/v1/uploads) or multipart (the files as `files`). A public
    reply queues its e-mails in the same transaction; a customer's reopens a resolved ticket."""
    caller = await caller_of(rt, request, write=True)
    wanted = lookups.require_id(ticket_id, "Ticket")
    if _is_multipart(request):
        form = await _message_form(request, rt.settings.message_max_files)
        try:
            posted = await _post_form(rt, caller.user_id, wanted, form)
        finally:
            await form.close()
    else:
        given = _json_body(MessageIn, await request.body())
        posted = await conversation.post_message(
            rt, caller.user_id, wanted, given.body, internal=given.internal,
            attachment_ids=given.attachment_ids, set_status=given.set_status,
        )  # fmt: skip
    shown = await threads.messages(rt, caller.user_id, [posted.message.id])
    view = shown.get(posted.message.id) or MessageView(posted.message, posted.attachments)
    body = {
        "message": message_json(view, await _names(rt, [view])),
        "ticket_status": posted.ticket.status,
        "email_task_ids": posted.email_task_ids,
    }
    headers = {"Location": f"{PREFIX}/tickets/{wanted}/messages"}
    return JSONResponse(body, status_code=201, headers=headers)


async def _message_form(request: Request, cap: int) -> FormData:
    """The multipart body; past the parser's file cap, the message's own 413 (as the pages)."""
    try:
        return await request.form(max_files=cap + 1, max_fields=20)
    except HTTPException as exc:
        if too_many_file_parts(exc):
            raise attachments.too_many(cap) from None
        raise


async def _post_form(rt: Any, user_id: int, ticket_id: int, form: FormData) -> Any:
    only_fields(form, _MESSAGE_FORM)
    body = _field(form, "body")
    internal = _field(form, "internal").lower() in ("1", "true", "on", "yes")
    status = _field(form, "set_status").upper() or None
    files = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
    incoming = [conversation.IncomingFile(f.filename or "file", f) for f in files]
    return await conversation.post_message(
        rt, user_id, ticket_id, body, internal=internal, files=incoming, set_status=status
    )


_UPLOAD_FORM = {
    "team_id": {"type": "integer", "minimum": 1, "maximum": lookups.MAX_ID},
    "file": {"type": "string", "format": "binary"},
}


@router.post(
    "/uploads",
    status_code=201,
    response_model=UploadOut,
    responses=ERRORS.write_file,
    openapi_extra=multipart(_UPLOAD_FORM, required=["team_id", "file"]),
)
async def upload(request: Request, rt: RuntimeDep) -> JSONResponse:
    """Step one of a two-step post: keep a file (multipart `file`, `team_id`) for your next
    message in that team; send its `attachment_id` with the message. Only you can use it."""
    caller = await caller_of(rt, request, write=True)
    if not _is_multipart(request):
        raise ValidationProblem("file", "send multipart/form-data with `file` and `team_id`")
    form = await request.form(max_files=1, max_fields=8)
    try:
        only_fields(form, _UPLOAD_FORM)
        team = lookups.require_id(_field(form, "team_id"), "Team")
        sent = form.get("file")
        if not isinstance(sent, UploadFile):
            raise ValidationProblem("file", "send the file as the multipart field `file`")
        staged = await conversation.stage_upload(
            rt, caller.user_id, team, conversation.IncomingFile(sent.filename or "file", sent)
        )
    finally:
        await form.close()
    body = {k: v for k, v in file_json(staged).items() if k != "download_url"}
    return JSONResponse(body, status_code=201)


def _is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _json_body(model: type[MessageIn], raw: bytes) -> MessageIn:
    """The JSON body, or a 422 that names the field to fix (not FastAPI's list of loc paths)."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        if first["type"] in ("json_invalid", "model_type", "json_type"):
            raise ValidationProblem("body", "send a JSON object (UTF-8)") from None
        if first["type"] == "string_too_long":
            raise TooLarge(where, first["msg"].lower()) from None
        raise ValidationProblem(where, first["msg"]) from None
