"""What a ticket's page shows of its conversation, as the templates (`_thread.html`, the
reply box in `ticket.html`) read it: one read of the thread (`desk.reads.conversation`) turned
into items in order — messages, and the history entries between them by time — with the names,
files and deliveries beside them; and the page's other blocks' contexts (Details, reminders)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fastapi import Request
from markupsafe import Markup
from starlette.datastructures import FormData, UploadFile

from desk.core import inputs
from desk.core.errors import NotFound, TooLarge
from desk.core.models import Priority, Role, Ticket, TicketStatus
from desk.core.runtime import Runtime
from desk.helpdesk import tickets
from desk.helpdesk.attachments import Attachment
from desk.helpdesk.thread import Change, Message
from desk.reads import conversation as reads
from desk.reads import ticket_page
from desk.reads.conversation import Delivery, ThreadView
from ui import message_text, sla_words, thread_cache
from ui.reminders_box import reminders_of
from ui.viewer import Viewer, team_cookie, viewer_of
from web.auth import session_secret

WINDOW = 50  # messages a page opens on, and a "Show earlier" brings
UNDER_WAY = ("sending", "retrying")


def chosen_files(form: FormData) -> list[UploadFile]:
    """The files of a form's `files` input (one left empty still sends a part with no name and
    no bytes: not a file)."""
    found = [f for f in form.getlist("files") if isinstance(f, UploadFile)]
    return [f for f in found if f.filename or (f.size or 0) > 0]


def at_us(value: datetime) -> int:
    """A time as µs since the epoch (the page's `at` and `X-Thread-At`)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1_000_000)


# An image is shown inline only when its bytes say it is a raster format (Attachment.is_image: the
# type is sniffed, never the sender's, and SVG, which can carry script, is never one); a larger
# one stays a link, so a thread of big photos costs nothing until someone asks for one.
THUMBNAIL_MAX_BYTES = 5 * 1024 * 1024


def thumbnail(a: Attachment) -> bool:
    return a.is_image and a.size <= THUMBNAIL_MAX_BYTES


def size(n: int) -> str:
    """A file's size as people read it: 812 B, 4.5 KiB, 2 MiB."""
    return f"{n} B" if n < 1024 else inputs.size_text(n)


@dataclass
class Shown:
    """A thread read, ready to show: `items` are ("message", Message) and ("change", Change)
    in the order they happened (a change made with a reply comes right after it)."""

    view: ThreadView
    items: list[tuple[str, Any]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def ticket(self) -> Ticket:
        return self.view.ticket

    @property
    def staff(self) -> bool:
        return self.view.member.is_staff

    @property
    def admin(self) -> bool:
        return self.view.member.is_admin

    @property
    def has_previous(self) -> bool:
        return self.view.messages.has_previous

    @property
    def has_messages(self) -> bool:
        return any(kind == "message" for kind, _item in self.items)

    @property
    def first_id(self) -> int:
        items = self.view.messages.items
        return items[0].id if items else 0

    @property
    def last_id(self) -> int:
        items = self.view.messages.items
        return items[-1].id if items else 0

    def name(self, user_id: int | None) -> str:
        return self.view.names.get(user_id or 0, "") if user_id else ""

    def assignee(self, value: str | None) -> str:
        """A history entry's assignee (a user id's text) by name; "" for nobody."""
        found = inputs.optional_id(value or "")
        return self.view.names.get(found, "?") if found else ""

    def files(self, m: Message) -> list[Attachment]:
        return self.view.files.get(m.id, [])

    def deliveries(self, m: Message) -> list[Delivery]:
        return self.view.deliveries.get(m.id, [])

    def under_way(self, m: Message) -> bool:
        return any(d.state in UNDER_WAY for d in self.deliveries(m))

    def failed(self, m: Message) -> bool:
        return any(d.state == "failed" for d in self.deliveries(m))

    def items_html(self, message: Any, change: Any, v: Viewer, locale: str) -> Markup:
        """`_thread.html`'s `items(t)`: its `message(m, t)` and `change(c, t)` macros over the
        items in order, in one call from the template (a call through Jinja costs more than
        the lookup it makes). A message's markup is remembered (ui.thread_cache) under every
        input the macro reads: the message (its redaction too), the names, files and
        deliveries shown with it, and the reader's side — staff, admin, language, zone and
        CSRF token."""
        side = (locale, v.tz.key, v.csrf, self.staff, self.admin)
        out = []
        for kind, item in self.items:
            if kind != "message":
                out.append(change(item, self))
                continue
            key = (
                side, item, self.name(item.author_id), self.name(item.redacted_by),
                tuple(self.files(item)), tuple(self.deliveries(item)),
            )  # fmt: skip
            out.append(thread_cache.remembered(key, partial(message, item, self)))
        return Markup("").join(out)

    @staticmethod
    def text(body: str, quoted_label: str) -> Markup:
        return message_text.render(body, quoted_label)

    @staticmethod
    def size(n: int) -> str:
        return size(n)

    @staticmethod
    def thumbnail(a: Attachment) -> bool:
        return thumbnail(a)


async def read_thread(rt: Runtime, user_id: int, ticket_id: int, **window: Any) -> ThreadView:
    """The thread as `desk.reads.conversation.read_thread` reads it, with the names of the admins
    who redacted what it shows: that read names authors and actors only, and "Redacted by"
    would otherwise never say who."""
    view = await reads.read_thread(rt, user_id, ticket_id, **window)
    found = {m.redacted_by for m in view.messages.items if m.redacted_by is not None}
    if found - view.names.keys():
        async with rt.engine.connect() as conn:
            view.names |= await reads.names_of(conn, found - view.names.keys())
    return view


def shown(view: ThreadView, *, after: int | None = None, h: int | None = None) -> Shown:
    """The read's items in order; only messages after `after` and changes after `h` when given
    (what a page that shows up to those ids lacks)."""
    messages = [m for m in view.messages.items if after is None or m.id > after]
    changes = [c for c in view.history if h is None or c.id > h]
    keyed: list[tuple[datetime, int, int, tuple[str, Any]]] = [
        (m.created_at, 0, m.id, ("message", m)) for m in messages
    ]
    keyed += [(c.at, 1, c.id, ("change", c)) for c in changes]
    keyed.sort(key=lambda k: k[:3])
    return Shown(view, [k[3] for k in keyed], changes if h is not None else [])


async def fields_context(rt: Runtime, v: Viewer, ticket: Ticket) -> dict[str, Any]:
    """What the ticket's Details block shows (names of the team for the assignee)."""
    members = await tickets.team_members(rt, v.user_id, ticket.team_id)
    return fields_of(v, ticket, members, rt.clock())


def fields_of(
    v: Viewer, ticket: Ticket, members: list[tuple[int, str, str, str]], now: datetime
) -> dict[str, Any]:
    """`fields_context` from the team's members as `tickets.team_members` answers; the SLA
    cell (staff) at `now`."""
    # The ticket's own team decides the role here, not the team picked in the header.
    role = next((Role(r) for uid, _n, _e, r in members if uid == v.user_id), None)
    is_staff = role is not None and role.is_staff
    return {
        "v": v,
        "ticket": ticket,
        "names": {uid: name for uid, name, _e, _r in members},
        "staff": [(uid, name) for uid, name, _e, r in members if r != Role.CUSTOMER],
        "is_staff": is_staff,
        "statuses": list(TicketStatus),
        "priorities": list(Priority),
        "sla": sla_words.sla_cell(ticket, now) if is_staff else None,
    }


def reply_context(
    rt: Runtime,
    t: Shown,
    *,
    values: dict[str, Any] | None = None,
    problem: Any = None,
    files: int = 0,
) -> dict[str, Any]:
    """The reply box: the form's values (kept after an error), its error and the caps — and
    which cap a refusal passed (`over`: file, count, total), so the message names its limit."""
    s = rt.settings
    over = None
    if isinstance(problem, TooLarge):
        over = "file" if problem.field == "file" else "total"
        over = "count" if files > s.message_max_files else over
    return {
        "t": t,
        "values": values or {},
        "problem": problem,
        "limits": {
            "file": inputs.size_text(s.attachment_max_bytes),
            "total": inputs.size_text(s.message_max_bytes),
            "files": s.message_max_files,
            "over": over,
        },
    }


async def opening_page(rt: Runtime, v: Viewer, ticket_id: int) -> dict[str, Any]:
    """The whole ticket page — Details, the thread's opening window, the reply box, staff's
    reminders — every part of it read in one statement (`desk.reads.ticket_page`)."""
    return _context_of(
        rt, v, await ticket_page.read_page(rt.pg, v.user_id, ticket_id, first=WINDOW)
    )


async def session_page(rt: Runtime, request: Request, ticket_id: int) -> dict[str, Any]:
    """`opening_page` for the request's session, who is looking read in the same statement
    (`read_with_session`): the page viewer's (`ui.viewer.page_viewer`) answers, so no session
    sends the browser to sign in, and a ticket not theirs is a "not found" with their header."""
    secret = session_secret(rt, request)
    found, page = await ticket_page.read_with_session(
        rt.pg, secret or "", rt.clock(), ticket_id, first=WINDOW
    )
    v = viewer_of(request, found, team_cookie(request))
    if page is None:
        raise NotFound("Ticket not found.")
    return _context_of(rt, v, page)


def _context_of(rt: Runtime, v: Viewer, page: ticket_page.TicketPage) -> dict[str, Any]:
    now = rt.clock()
    context = fields_of(v, page.view.ticket, page.members, now)
    context |= reply_context(rt, shown(page.view))
    context["read_at"] = at_us(now)
    if context["is_staff"] and page.reminders is not None:
        context |= reminders_of(v, page.view.ticket, page.pending, page.reminders, now)
    return context
