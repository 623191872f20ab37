"""`taskdesk messages`: a ticket's conversation as a given user sees it (list), and what staff
and admins do to one message (retry its failed e-mails, redact it) — through the same desk
functions as the pages and GraphQL (desk/reads/conversation.py, desk/work/conversation.py), so
who may see or do what is decided there: a ticket or message the user may not see answers
"not found", exactly as a missing one, and a note never shows to a customer."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from taskdesk.commands import Subparsers, add_data_dir, with_runtime

MAX_WINDOW = 200  # desk.helpdesk.thread.MAX_PAGE: one read shows at most this many messages
FIRST_LINE = 72  # characters of a message's first line that `list` prints
INDENT = " " * 56  # under the text column of `list`


def _id(value: str) -> int:
    """An id as typed: digits only; one that cannot be an id is "not found" later (as missing)."""
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        raise argparse.ArgumentTypeError(f"not an id: {value!r}")
    return int(text)


def _count(value: str) -> int:
    n = _id(value)
    if not 1 <= n <= MAX_WINDOW:
        raise argparse.ArgumentTypeError(f"between 1 and {MAX_WINDOW}")
    return n


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "messages",
        help="read a ticket's conversation as a user; retry or redact a message",
        description="A ticket's conversation (replies, internal notes, files, e-mail "
        "delivery) as a given user sees it, and what staff (retry) and admins (redact) may do "
        "to one message. A ticket or message the user may not see is 'not found'.",
    )
    sub = p.add_subparsers(dest="messages_command", metavar="ACTION", required=True)
    ls = sub.add_parser(
        "list",
        help="a ticket's messages as the user sees them (notes and deliveries: staff only)",
    )
    ls.add_argument("ticket", type=_id, metavar="TICKET_ID", help="ticket id")
    ls.add_argument("--user", required=True, metavar="EMAIL", help="read as this user")
    ls.add_argument(
        "--last", type=_count, default=50, metavar="N",
        help=f"how many messages, newest ones unless --after (1 to {MAX_WINDOW}, "
        "default: %(default)s)",
    )  # fmt: skip
    where = ls.add_mutually_exclusive_group()
    where.add_argument("--after", type=_id, metavar="MESSAGE_ID", help="the ones after it")
    where.add_argument("--before", type=_id, metavar="MESSAGE_ID", help="the ones before it")
    ls.set_defaults(func=with_runtime(_list))
    retry = sub.add_parser("retry", help="send a message's failed e-mails again (staff, admins)")
    retry.add_argument("message", type=_id, metavar="MESSAGE_ID", help="message id (see `list`)")
    retry.add_argument("--user", required=True, metavar="EMAIL", help="as this staff member")
    retry.set_defaults(func=with_runtime(_retry, pool_size=2))
    redact = sub.add_parser(
        "redact",
        help="empty a message and delete its files (team admins; audited, cannot be undone)",
    )
    redact.add_argument("message", type=_id, metavar="MESSAGE_ID", help="message id (see `list`)")
    redact.add_argument("--user", required=True, metavar="EMAIL", help="as this team admin")
    redact.set_defaults(func=with_runtime(_redact))
    for parser in (p, ls, retry, redact):
        add_data_dir(parser)


def _when(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M")


def _shown(text: str) -> str:
    """Text from users, safe for a terminal: no escape sequence or other control character."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _first_line(body: str) -> str:
    lines = body.strip().splitlines()
    if not lines:
        return ""
    line = lines[0].strip()
    if len(line) > FIRST_LINE:
        return line[: FIRST_LINE - 1] + "…"
    return line + (" …" if len(lines) > 1 else "")


def _checked(value: int | None, what: str) -> int | None:
    """An id within PostgreSQL's int4, else NotFound: an odd id answers as a missing one."""
    from desk.reads import lookups

    return None if value is None else lookups.require_id(value, what)


async def _list(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.core.inputs import size_text
    from desk.reads import conversation

    user = await task_admin.user_id_by_email(rt, args.user)
    view = await conversation.read_thread(
        rt, user, _checked(args.ticket, "Ticket") or 0, first=args.last,
        after=_checked(args.after, "Message"), before=_checked(args.before, "Message"),
    )  # fmt: skip
    t = view.ticket
    role = view.member.role.value.lower()
    print(f"ticket {t.id}: {_shown(t.title)} [{t.status}], as {args.user} ({role})")
    page = view.messages
    if page.has_previous and page.items:
        print(f"  (earlier messages: --before {page.items[0].id})")
    print(f"{'id':>7}  {'time (UTC)':<16}  {'author':<20} {'kind':<6}  text")
    for m in page.items:
        author = view.names.get(m.author_id, "(gone)") if m.author_id else "(gone)"
        kind = "note" if m.internal else "public"
        if m.redacted_at is not None:
            by = view.names.get(m.redacted_by or 0, "an admin")
            text = f"[redacted {_when(m.redacted_at)} by {by}]"
        else:
            text = _first_line(m.body) or "(no text)"
        print(f"{m.id:>7}  {_when(m.created_at):<16}  {_shown(author)[:20]:<20} {kind:<6}  {_shown(text)}")  # fmt: skip
        files = view.files.get(m.id, [])
        if files:
            listed = ", ".join(f"{_shown(a.filename)} ({size_text(a.size)})" for a in files)
            print(f"{INDENT}files: {listed}")
        for d in view.deliveries.get(m.id, []):  # staff only: read_thread fills it for staff
            reply = f": {_shown(d.reply)}" if d.reply else ""
            tries = f" after {d.attempts} attempts" if d.state in ("retrying", "failed") else ""
            print(f"{INDENT}mail to {_shown(d.recipient_name) or '?'}: {d.state}{tries}{reply}")
    if not page.items:
        print("(no messages)")
    if page.has_next and page.items:
        print(f"  (later messages: --after {page.items[-1].id})")


async def _retry(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.work import conversation

    user = await task_admin.user_id_by_email(rt, args.user)
    message = _checked(args.message, "Message") or 0
    tasks = await conversation.retry_delivery(rt, user, message)
    ids = ", ".join(str(t.id) for t in tasks)
    print(
        f"message {message}: sending {len(tasks)} failed e-mail{'s' if len(tasks) != 1 else ''} "
        f"again (task{'s' if len(tasks) != 1 else ''} {ids}; follow with `taskdesk tasks show`)"
    )


async def _redact(rt: Any, args: argparse.Namespace) -> None:
    from desk.console import task_admin
    from desk.work import conversation

    user = await task_admin.user_id_by_email(rt, args.user)
    m = await conversation.redact_message(rt, user, _checked(args.message, "Message") or 0)
    when = _when(m.redacted_at) if m.redacted_at else "-"
    print(f"message {m.id} of ticket {m.ticket_id}: redacted ({when} UTC); files deleted")
