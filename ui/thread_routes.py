"""A ticket's conversation on its page (docs/architecture.md, "Conversation"): the thread's
window, the earlier windows, what is newer than the page shows (asked when the ticket's live
stream says `changed`, ui/ticket_live.py), one message, and what people do there — reply or add
a note with files, retry a failed e-mail, redact.

Every read goes through `desk.reads.conversation` with the viewer's id, so a note (its files, its
existence) is for staff only and a ticket or message the viewer may not see answers exactly as a
missing one. The page opens on the newest WINDOW messages; older ones come a window at a time.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException

from desk.core import inputs
from desk.core.errors import NotFound, TooLarge, ValidationProblem
from desk.core.runtime import Runtime
from desk.helpdesk import attachments, thread
from desk.reads import conversation as reads
from desk.reads.conversation import ThreadView
from desk.work import conversation
from desk.work.conversation import IncomingFile
from ui.render import fragment, is_htmx, render, render_html
from ui.route import UiRoute, redirect
from ui.thread_view import (
    WINDOW,
    Shown,
    at_us,
    chosen_files,
    fields_context,
    opening_page,
    read_thread,
    reply_context,
    shown,
)
from ui.viewer import FragmentViewer, PageViewer, Viewer
from web.auth import RuntimeDep
from web.errors import too_many_file_parts

router = APIRouter(route_class=UiRoute)
TICKED = {"on", "1", "true", "yes"}
MAX_LISTED = 60  # message ids a fragment request may name (`d`): the page's newest window
TicketId = Annotated[int, Path(ge=1, le=inputs.MAX_INT4)]
MessageId = Annotated[int, Path(ge=1, le=inputs.MAX_INT4)]
# One post at a time per person and ticket in this process: a double submit waits for the
# first, then finds its message (`_replayed`) instead of posting it again.
_turns: weakref.WeakValueDictionary[tuple[int, int], asyncio.Lock] = weakref.WeakValueDictionary()


def _ids(raw: str) -> set[int]:
    """`d`: message ids, comma-separated (the page's messages whose delivery is under way)."""
    parts = [p for p in raw.split(",") if p]
    if len(parts) > MAX_LISTED:
        raise ValidationProblem("d", f"at most {MAX_LISTED} message ids")
    found = {inputs.optional_id(p) for p in parts}
    if None in found:
        raise ValidationProblem("d", "message ids, separated by commas")
    return {i for i in found if i is not None}


def _html(v: Viewer, name: str, context: dict[str, Any], block: str) -> str:
    return render_html(v.locale, name, context, block)


async def _newer_html(
    rt: Runtime, v: Viewer, request: Request, view: ThreadView, *, after: int, h: int,
    pending: set[int], since_us: int,
) -> str:  # fmt: skip
    """What the page lacks: messages after `after` and history after `h` (to append), and out
    of band the shown messages that changed (a delivery under way, a redaction since
    `since_us`) and, when the history grew, the Details block and the title."""
    t = shown(view, after=after, h=h)
    oob = [m for m in view.messages.items if m.id <= after]
    ctx = {"request": request, "v": v, "t": t, "oob": True}
    parts = [_html(v, "ticket.html", ctx, "thread_items")]
    for m in oob:
        if m.redacted_at is not None and at_us(m.redacted_at) >= since_us:
            parts.append(_html(v, "ticket.html", ctx | {"m": m}, "message"))
        elif t.staff and m.id in pending:
            parts.append(_html(v, "ticket.html", ctx | {"m": m}, "delivery"))
    if t.changes:
        fields = await fields_context(rt, v, view.ticket) | {"request": request, "oob": True}
        parts += [
            _html(v, "ticket.html", fields, "fields"),
            _html(v, "ticket.html", fields, "heading"),
        ]
    return "".join(parts)


@router.get("/tickets/{ticket_id}/thread")
async def thread_fragment(
    request: Request,
    ticket_id: TicketId,
    rt: RuntimeDep,
    v: FragmentViewer,
    after: Annotated[int | None, Query(ge=0, le=inputs.MAX_INT4)] = None,
    before: Annotated[int | None, Query(ge=1, le=inputs.MAX_INT4)] = None,
    h: Annotated[int, Query(ge=0, le=inputs.MAX_INT4)] = 0,
    d: Annotated[str, Query(max_length=1000)] = "",
    at: Annotated[int, Query(ge=0, le=2**62)] = 0,
) -> Response:
    """`before`: the window of messages before that one (the "Show earlier" control);
    otherwise what is newer than `after`/`h` (the live page's catch-up)."""
    pending = _ids(d)
    read_at = at_us(rt.clock())
    view = await read_thread(rt, v.user_id, ticket_id, first=WINDOW, before=before)
    if not is_htmx(request):
        return redirect(request, f"/tickets/{ticket_id}")
    if before is not None:
        ctx = {"request": request, "v": v, "t": shown(view)}
        return fragment(_html(v, "ticket.html", ctx, "earlier"))
    page = view.messages
    if after is not None and page.has_previous and page.items and page.items[0].id > after + 1:
        # More arrived than one window holds: the page reads itself again rather than show a gap.
        return Response(status_code=204, headers={"HX-Refresh": "true"})
    html = await _newer_html(
        rt, v, request, view, after=after or 0, h=h, pending=pending, since_us=at
    )
    answer = fragment(html) if html.strip() else Response(status_code=204)
    answer.headers["X-Thread-At"] = str(read_at - REDACT_MARGIN_US)
    answer.headers["Cache-Control"] = "no-store"
    return answer


# A redaction committed while a read was under way carries a time before the read's end: the next
# read looks this far back, so it is never missed (and a redaction is re-sent only for a while).
REDACT_MARGIN_US = 30_000_000


async def _one(rt: Runtime, v: Viewer, ticket_id: int, message_id: int) -> Shown:
    """One message of the ticket as the viewer may see it; a note for a customer, another
    ticket's message and a missing one are the same NotFound."""
    view = await read_thread(rt, v.user_id, ticket_id, first=1, after=message_id - 1, latest=False)
    items = view.messages.items
    if not items or items[0].id != message_id:
        raise NotFound("Message not found.")
    return shown(view)


def _message_answer(request: Request, v: Viewer, t: Shown, block: str = "message") -> Response:
    m = t.view.messages.items[0]
    if not is_htmx(request):
        return redirect(request, f"/tickets/{m.ticket_id}#msg-{m.id}")
    return fragment(_html(v, "ticket.html", {"request": request, "v": v, "t": t, "m": m}, block))


@router.get("/tickets/{ticket_id}/messages/{message_id}")
async def message_fragment(
    request: Request, ticket_id: TicketId, message_id: MessageId, rt: RuntimeDep, v: FragmentViewer
) -> Response:
    return _message_answer(request, v, await _one(rt, v, ticket_id, message_id))


@router.post("/tickets/{ticket_id}/messages/{message_id}/retry")
async def retry_delivery(
    request: Request, ticket_id: TicketId, message_id: MessageId, rt: RuntimeDep, v: PageViewer
) -> Response:
    """Staff send a message's failed e-mails again; its delivery block comes back."""
    await _one(rt, v, ticket_id, message_id)
    await conversation.retry_delivery(rt, v.user_id, message_id)
    return _message_answer(request, v, await _one(rt, v, ticket_id, message_id), "delivery")


@router.post("/tickets/{ticket_id}/messages/{message_id}/redact")
async def redact(
    request: Request, ticket_id: TicketId, message_id: MessageId, rt: RuntimeDep, v: PageViewer
) -> Response:
    """An admin empties a message (audited); it comes back as "Redacted by …"."""
    await _one(rt, v, ticket_id, message_id)
    await conversation.redact_message(rt, v.user_id, message_id)
    return _message_answer(request, v, await _one(rt, v, ticket_id, message_id))


def _text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


async def _replayed(
    rt: Runtime, v: Viewer, ticket_id: int, seen: int | None, body: str, internal: bool, files: int
) -> bool:
    """Whether this post is a resend of one already made from the same rendered form (a double
    click, a retried request): the viewer's own message with the same text, kind and number of
    files, after the newest message the form was rendered with."""
    if seen is None:
        return False
    text = thread.clean_body(body, allow_empty=files > 0)
    view = await reads.read_thread(
        rt, v.user_id, ticket_id, first=thread.MAX_PAGE, after=seen, latest=False
    )
    return any(
        m.author_id == v.user_id and m.internal == internal and m.body == text
        and m.attachment_count == files and m.redacted_at is None
        for m in view.messages.items
    )  # fmt: skip


def _kept(body: str) -> str:
    """The text put back in the box after an error: what could not be stored (NUL, controls)
    shown as U+FFFD so the person sees where it was."""
    return "".join("\ufffd" if inputs.problem_in(c) else c for c in body)


@router.post("/tickets/{ticket_id}/messages")
async def post_reply(
    request: Request, ticket_id: TicketId, rt: RuntimeDep, v: PageViewer
) -> Response:
    """A reply or (staff) a note, with files and, for staff, a status; the answer is what the
    thread gained, with a fresh form out of band. An error re-renders the form with the text."""
    s = rt.settings
    try:
        form = await request.form(max_files=s.message_max_files * 2 + 2, max_fields=50)
    except HTTPException as exc:
        # The parser's own cap on file parts (a bound on temporary files) is the same refusal
        # as the message's cap, not a malformed form: 413, naming the limit. The text is lost.
        if not too_many_file_parts(exc):
            raise
        problem = attachments.too_many(s.message_max_files)
        return await _refused(request, rt, v, ticket_id, problem, {}, s.message_max_files + 1)
    try:
        return await _post(request, ticket_id, rt, v, form)
    finally:
        await form.close()


async def _post(
    request: Request, ticket_id: int, rt: Runtime, v: Viewer, form: FormData
) -> Response:
    body, internal = _text(form, "body"), _text(form, "internal").lower() in TICKED
    status = _text(form, "set_status").upper() or None
    seen = inputs.optional_id(_text(form, "seen"))
    after = inputs.optional_id(_text(form, "after")) or 0
    h = inputs.optional_id(_text(form, "h")) or 0
    uploads = chosen_files(form)
    lock = _turns.setdefault((v.user_id, ticket_id), asyncio.Lock())
    try:
        async with lock:
            if not await _replayed(rt, v, ticket_id, seen, body, internal, len(uploads)):
                files = [IncomingFile(u.filename or "file", u) for u in uploads]
                await conversation.post_message(
                    rt, v.user_id, ticket_id, body, internal=internal, files=files,
                    set_status=status,
                )  # fmt: skip
    except (ValidationProblem, TooLarge) as problem:
        kept = {"body": _kept(body), "internal": internal}
        return await _refused(request, rt, v, ticket_id, problem, kept, len(uploads))
    if not is_htmx(request):
        return redirect(request, f"/tickets/{ticket_id}")
    view = await read_thread(rt, v.user_id, ticket_id, first=WINDOW)
    html = await _newer_html(rt, v, request, view, after=after, h=h, pending=set(), since_us=0)
    ctx = {"request": request, "v": v, "oob": True} | reply_context(rt, shown(view))
    return fragment(html + _html(v, "ticket.html", ctx, "reply"))


async def _refused(
    request: Request, rt: Runtime, v: Viewer, ticket_id: int, problem: Any,
    values: dict[str, Any], files: int,
) -> Response:  # fmt: skip
    """The form again, with the person's text and the error (422, or 413 for a cap); the
    thread as the page opens on it, read as the page reads it (one statement)."""
    page = await opening_page(rt, v, ticket_id)
    ctx = reply_context(rt, page["t"], values=values, problem=problem, files=files)
    if not is_htmx(request):
        return render(request, "ticket.html", page | ctx, status=problem.http_status)
    ctx |= {"request": request, "v": v}
    answer = fragment(_html(v, "ticket.html", ctx, "reply"), status=problem.http_status)
    answer.headers.update({"HX-Retarget": "#reply", "HX-Reswap": "outerHTML"})
    return answer
