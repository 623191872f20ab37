"""E-mail as a task kind: `queue_email` accepts one EMAIL task in the caller's transaction;
`render` and `build_message` make the message the worker sends (jobs/processors/email.py).

A message names one of `TEMPLATES`; its texts (plain and HTML, English and Simplified Chinese)
are Jinja2 files in `mail_templates/`, the HTML autoescaped. The task row keeps what rendering
needs — address, template, parameters, language, time zone — never a secret beyond the link
the message carries. Its `Message-ID` comes from the task id, so a message sent again after a
crash between the server's "250" and the ledger's commit is the same message
(docs/architecture.md, "E-mail").

Links may be given as paths (`/tasks/7`) or absolute URLs; a path is made absolute from
`PUBLIC_URL` when the message is built (`absolute`).
"""

from __future__ import annotations

import email.utils
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import jinja2
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import ValidationProblem
from desk.ledger import mail as ledger_mail

TEMPLATE_DIR = Path(__file__).parent / "mail_templates"
# Template name -> the parameters it needs (`*_at`: an ISO-8601 time, shown in the recipient's zone).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "invitation": ("team_name", "inviter_name", "role", "link", "expires_at"),
    "password_reset": ("link", "expires_at"),
    "export_ready": ("task_id", "team_name", "rows", "link", "expires_at"),
    "reminder": ("ticket_id", "ticket_title", "link"),
    "sla_alert": ("ticket_id", "ticket_title", "target", "kind", "due_at", "link"),
    "ticket_message": (
        "ticket_id",
        "ticket_title",
        "team_name",
        "author_name",
        "body",
        "files",
        "reply",
        "link",
    ),
}
LOCALES = ("en", "zh_Hans")
# Tries per message: 4xx answers and unreachable servers back off between them (the ledger's
# retry rule), about four minutes in all with the default RETRY_* settings.
MAX_ATTEMPTS = 8
MAX_PARAM_CHARS = 2000
LONG_PARAMS = {"body": 20_000}  # a message's text travels in its e-mail
# A conversation's threading (docs/architecture.md, "Conversation"): tokens, made into
# `<taskdesk-TOKEN@host>` ids when the message is built, as the task's own Message-ID is.
THREAD_KEYS = ("message", "parent", "root")
_TOKEN = re.compile(r"[a-z0-9-]{1,80}")


def absolute(path: str, public_url: str) -> str:
    """`path` under `public_url` (the PUBLIC_URL setting); an absolute http(s) URL is returned
    as it is."""
    if urlsplit(path).scheme in ("http", "https"):
        return path
    return public_url.rstrip("/") + "/" + path.lstrip("/")


def message_id(task_id: int, public_url: str) -> str:
    """The task's one Message-ID, whichever worker sends it and however often."""
    host = urlsplit(public_url).hostname or "localhost"
    return f"<taskdesk-task-{task_id}@{host}>"


def locale_of(tag: str | None) -> str:
    """A supported locale for a language tag (zh-CN, zh_Hans … → zh_Hans; else English)."""
    tag = (tag or "").strip().replace("_", "-").lower()
    return "zh_Hans" if tag.startswith("zh") else "en"


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationProblem("timezone", f"{name!r} is not a time zone name") from None


def _address(to: str) -> str:
    name, address = email.utils.parseaddr(to)
    local, _, domain = address.rpartition("@")
    if (
        not local
        or address != to.strip()
        or ("." not in domain.strip(".") and domain != "localhost")
        or name
        or len(address) > 320
        or any(c.isspace() or c in '<>,;"' for c in address)
    ):
        raise ValidationProblem("to", f"{to!r} is not one e-mail address")
    return address


def _params(template: str, params: dict[str, object]) -> dict[str, Any]:
    if template not in TEMPLATES:
        raise ValidationProblem("template", f"unknown template; one of {', '.join(TEMPLATES)}")
    missing = [p for p in TEMPLATES[template] if p not in params]
    if missing:
        raise ValidationProblem("params", f"{template} needs {', '.join(missing)}")
    out: dict[str, Any] = {}
    for name in TEMPLATES[template]:
        value = params[name]
        if isinstance(value, datetime):
            if value.tzinfo is None:
                raise ValidationProblem("params", f"{name} needs a time zone")
            value = value.astimezone(UTC).isoformat()
        longest = LONG_PARAMS.get(name, MAX_PARAM_CHARS)
        if not isinstance(value, str | int) or len(str(value)) > longest:
            raise ValidationProblem("params", f"{name}: a short text or a number")
        if name.endswith("_at"):
            _time(str(value))
        out[name] = value
    return out


def _time(value: str) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationProblem("params", f"{value!r} is not an ISO-8601 time") from None
    if at.tzinfo is None:
        raise ValidationProblem("params", f"{value!r} needs a time zone (UTC: +00:00)")
    return at


async def queue_email(
    conn: AsyncConnection,
    *,
    to: str,
    template: str,
    params: dict[str, object],
    locale: str,
    timezone: str,
    team_id: int | None,
    user_id: int | None,
    now: datetime,
    thread: dict[str, str] | None = None,
    ticket_id: int | None = None,
) -> int:
    """Insert one EMAIL task (WAITING, short lane) in the caller's open transaction and return
    its id; it is sent after the caller commits (the dispatcher's next pass). `template` names
    one of `TEMPLATES`; bad input raises ValidationProblem before anything is written."""
    task = await ledger_mail.accept_email(
        conn,
        team_id=team_id,
        owner_id=user_id,
        scope_key=new_scope(),
        filters=email_filters(to, template, params, locale, timezone, thread),
        max_attempts=MAX_ATTEMPTS,
        now=now,
        ticket_id=ticket_id,
    )
    return task.id or 0


def new_scope() -> str:
    """An EMAIL task's scope: its own (e-mails never conflict with one another)."""
    return f"email:{secrets.token_hex(12)}"


def email_filters(
    to: str,
    template: str,
    params: dict[str, object],
    locale: str,
    timezone: str,
    thread: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An EMAIL task's filters, checked: a bad address, template, parameter or time zone raises
    ValidationProblem, and the message is rendered once so a template error surfaces here."""
    filters = {
        "to": _address(to),
        "template": template,
        "params": _params(template, params),
        "locale": locale_of(locale),
        "timezone": _zone(timezone).key,
    }
    if thread:
        filters["thread"] = _thread(thread)
    render(filters, public_url="http://check.invalid")
    return filters


def _thread(thread: dict[str, str]) -> dict[str, str]:
    if set(thread) - set(THREAD_KEYS) or "message" not in thread:
        raise ValidationProblem("thread", f"message, and optionally {', '.join(THREAD_KEYS[1:])}")
    if not all(_TOKEN.fullmatch(v) for v in thread.values()):
        raise ValidationProblem("thread", "tokens of a-z, 0-9 and -")
    return dict(thread)


def thread_id(token: str, public_url: str) -> str:
    """A conversation message's Message-ID: the same whichever e-mail of it, and however often."""
    host = urlsplit(public_url).hostname or "localhost"
    return f"<taskdesk-{token}@{host}>"


# --- rendering -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    subject: str
    text: str
    html: str


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env


def _when(value: str, zone: ZoneInfo, locale: str) -> str:
    at = _time(value).astimezone(zone)
    if locale == "zh_Hans":
        return f"{at.year}年{at.month}月{at.day}日 {at:%H:%M}（{zone.key}）"  # noqa: RUF001
    return f"{at:%a} {at.day} {at:%b %Y}, {at:%H:%M} ({zone.key})"


def render(filters: dict[str, Any], *, public_url: str) -> Rendered:
    """Subject, text and HTML of the message an EMAIL task's filters describe."""
    locale, name = filters["locale"], filters["template"]
    zone = _zone(filters["timezone"])
    values: dict[str, Any] = {}
    for key, value in filters["params"].items():
        if key.endswith("_at"):
            value = _when(str(value), zone, locale)
        elif key == "link":
            value = absolute(str(value), public_url)
        values[key] = value
    env = _env()
    subject, _, text = env.get_template(f"{name}.{locale}.txt").render(values).partition("\n")
    html = env.get_template(f"{name}.{locale}.html").render(values, locale=locale)
    return Rendered(subject.removeprefix("Subject:").strip(), text.lstrip("\n"), html)


def build_message(
    task_id: int, filters: dict[str, Any], created_at: datetime, *, mail_from: str, public_url: str
) -> EmailMessage:
    """The whole message (text and HTML alternatives), the same bytes for every send of it."""
    rendered = render(filters, public_url=public_url)
    msg = EmailMessage()
    msg["From"] = mail_from
    msg["To"] = filters["to"]
    msg["Subject"] = rendered.subject
    msg["Date"] = email.utils.format_datetime(created_at.astimezone(UTC))
    thread = filters.get("thread")
    if thread:
        # One Message-ID per conversation message; each recipient's copy and every resend of it
        # carries it, and a mail client threads it under the ones before (RFC 5322 3.6.4).
        msg["Message-ID"] = thread_id(thread["message"], public_url)
        if "parent" in thread:
            msg["In-Reply-To"] = thread_id(thread["parent"], public_url)
            refs = [thread.get("root"), thread["parent"]]
            msg["References"] = " ".join(
                thread_id(t, public_url) for t in dict.fromkeys(r for r in refs if r)
            )
    else:
        msg["Message-ID"] = message_id(task_id, public_url)
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(rendered.text)
    msg.add_alternative(rendered.html, subtype="html")
    msg.set_boundary(f"taskdesk-task-{task_id}")  # same bytes on every send, not a random one
    msg["Content-Language"] = "zh-Hans" if filters["locale"] == "zh_Hans" else "en"
    return msg


def recipient(filters: dict[str, Any]) -> str:
    return str(filters["to"])
