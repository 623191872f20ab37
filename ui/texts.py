"""Server-written text in the reader's language: desk messages, export descriptions, numbers.

The desk records a message as a key and parameters beside its English sentence
(`desk.core.messages`); here the key's template goes through the reader's catalog and each
parameter is formatted for them — counts with their locale's grouping, times in their time zone,
ticket statuses as the pages name them. A row written before keys existed (no key) shows its
English sentence, translated when the catalog happens to know it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from desk.core import messages
from desk.core.errors import ValidationProblem
from desk.helpdesk import filters
from ui.i18n import Catalog

# Digit grouping and decimal mark per locale (CLDR: both English and Chinese write 1,350,030).
NUMBER_FORMAT = {"en": (",", "."), "zh_Hans": (",", ".")}
TIME_FORMAT = {"en": "%Y-%m-%d %H:%M", "zh_Hans": "%Y-%m-%d %H:%M"}


def number(locale: str, value: object) -> str:
    """1350030 → "1,350,030" (the locale's grouping); anything not a number is shown as is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "" if value is None else str(value)
    group, decimal = NUMBER_FORMAT.get(locale, NUMBER_FORMAT["en"])
    text = f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"
    return text.replace(",", "\x00").replace(".", decimal).replace("\x00", group)


def when(locale: str, value: datetime | str | None, tz: ZoneInfo | None) -> str:
    if value is None:
        return ""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(tz or UTC).strftime(TIME_FORMAT.get(locale, TIME_FORMAT["en"]))


def _param(cat: Catalog, locale: str, name: str, value: Any, tz: ZoneInfo | None) -> str:
    if name.endswith("_at") and isinstance(value, str):
        return when(locale, value, tz)
    if name == "status" and isinstance(value, str):
        label = cat.gettext(value.title())
        return label.lower() if locale == "en" else label
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(locale, value)
    return str(value)


def say(
    cat: Catalog,
    locale: str,
    key: str | None,
    params: dict[str, Any] | None,
    fallback: str | None,
    tz: ZoneInfo | None = None,
) -> str:
    """A desk message in the reader's language; `fallback` (the English) when it has no key."""
    template = messages.TEMPLATES.get(key or "")
    if template is None:
        return cat.domain_text(fallback)
    params = params or {}
    form = messages.pick_form(template, params)
    text = cat.ngettext(*form) if isinstance(form, tuple) else cat.gettext(form)
    try:
        return text % {k: _param(cat, locale, k, v, tz) for k, v in params.items()}
    except (KeyError, ValueError, TypeError):  # a translation that lost a placeholder
        return fallback or ""


def error_title(cat: Catalog, key: str | None, params: dict[str, Any] | None, fallback: str) -> str:
    """The title of a group of failures (desk.console.failures) whose newest error has a message
    key: its template in the reader's language with the figures left out, as the grouping leaves
    them out ("N rows is more than the limit of N; …"). `fallback`, the grouped English, else."""
    template = messages.TEMPLATES.get(key or "")
    if template is None:
        return fallback
    params = params or {}
    form = messages.pick_form(template, params)
    # A group counts many: the plural form.
    text = cat.ngettext(form[0], form[1], 2) if isinstance(form, tuple) else cat.gettext(form)
    blanks = {k: "N" if _is_number(v) else "…" for k, v in params.items()}
    try:
        return text % blanks
    except (KeyError, ValueError, TypeError):  # a translation that lost a placeholder
        return fallback


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def describe_export(cat: Catalog, locale: str, raw: dict[str, Any]) -> str:
    """An export's filters in words, in the reader's language ("All urgent tickets")."""
    try:
        f = filters.parse_filter(raw)
    except ValidationProblem:
        return cat.gettext("Tickets (filters no longer valid)")

    def words(values: tuple[str, ...], lower: bool) -> str:
        out = [cat.gettext(v.title()) for v in values]
        return "/".join(w.lower() if lower and locale == "en" else w for w in out)

    statuses = words(f.status, lower=False) if f.status else cat.gettext("All")
    if f.priority:
        text = cat.gettext("%(statuses)s %(priorities)s tickets") % {
            "statuses": statuses,
            "priorities": words(f.priority, lower=True),
        }
    else:
        text = cat.gettext("%(statuses)s tickets") % {"statuses": statuses}
    if f.assignment == "me":
        text += cat.gettext(" assigned to me")
    elif f.assignment == "unassigned":
        text += cat.gettext(" not assigned")
    elif f.assignment == "user":
        text += cat.gettext(" assigned to user #%(id)s") % {"id": f.assignee_id}
    if f.q:
        text += cat.gettext(' with "%(q)s" in the title') % {"q": f.q}
    if f.sla:
        text += cat.gettext(filters.SLA_WORDS[f.sla])
    return text


# Every msgid this module asks a catalog for (the language test checks they are translated).
MSGIDS = (
    "Tickets (filters no longer valid)",
    "All",
    "%(statuses)s %(priorities)s tickets",
    "%(statuses)s tickets",
    " assigned to me",
    " not assigned",
    " assigned to user #%(id)s",
    ' with "%(q)s" in the title',
    *filters.SLA_WORDS.values(),
)
