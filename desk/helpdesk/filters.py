"""Ticket filters: parsed and normalised once, then used by the ticket list and by exports alike."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.core.models import Priority, TicketStatus
from desk.helpdesk.sla_state import FILTERABLE, sla_sql

ASSIGNMENTS = ("anyone", "me", "unassigned", "user")
MAX_Q = 200
# The SLA filter in words (describe; ui/texts.py translates the same ones).
SLA_WORDS = {
    "BREACHED": ", SLA breached",
    "DUE_SOON": ", SLA due within the hour",
    "RUNNING": ", SLA running",
}


@dataclass(frozen=True)
class TicketFilter:
    status: tuple[str, ...] = ()
    priority: tuple[str, ...] = ()
    assignment: str = "anyone"
    assignee_id: int | None = None  # with assignment == "user"
    q: str = ""
    sla: str = ""  # BREACHED, DUE_SOON or RUNNING (desk/helpdesk/sla_state.py); staff only

    def as_dict(self) -> dict[str, Any]:
        """The normalised form stored on a task and hashed for idempotency."""
        out: dict[str, Any] = {"assignment": self.assignment}
        if self.status:
            out["status"] = list(self.status)
        if self.priority:
            out["priority"] = list(self.priority)
        if self.assignee_id is not None:
            out["assignee_id"] = self.assignee_id
        if self.q:
            out["q"] = self.q
        if self.sla:
            out["sla"] = self.sla
        return out

    def fingerprint(self) -> str:
        raw = json.dumps(self.as_dict(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()[:32]

    def describe(self) -> str:
        """The filters in words, for task rows ("Open, urgent tickets assigned to me matching 'x'")."""
        parts = []
        parts.append("/".join(s.title() for s in self.status) if self.status else "All")
        if self.priority:
            parts.append("/".join(p.lower() for p in self.priority))
        text = " ".join(parts) + " tickets"
        if self.assignment == "me":
            text += " assigned to me"
        elif self.assignment == "unassigned":
            text += " not assigned"
        elif self.assignment == "user":
            text += f" assigned to user #{self.assignee_id}"
        if self.q:
            text += f' with "{self.q}" in the title'
        if self.sla:
            text += SLA_WORDS[self.sla]
        return text


def _enum_list(
    field: str, values: Any, allowed: type[TicketStatus] | type[Priority]
) -> tuple[str, ...]:
    if values in (None, "", []):
        return ()
    if isinstance(values, str):
        values = [v for v in values.split(",") if v]
    if not isinstance(values, (list, tuple)):
        raise ValidationProblem(field, "must be a list of values")
    names = {m.value for m in allowed}
    out = set()
    for v in values:
        up = str(v).strip().upper()
        if up not in names:
            raise ValidationProblem(
                field, f"unknown value {v!r}; use one of {', '.join(sorted(names))}"
            )
        out.add(up)
    order = [m.value for m in allowed]
    return tuple(sorted(out, key=order.index))


def parse_filter(raw: dict[str, Any] | None) -> TicketFilter:
    """Validate user input; unknown values raise ValidationProblem naming the field."""
    raw = dict(raw or {})
    unknown = set(raw) - {"status", "priority", "assignment", "assignee_id", "q", "sla"}
    if unknown:
        raise ValidationProblem(sorted(unknown)[0], "unknown filter")
    assignment = str(raw.get("assignment") or "anyone").strip().lower()
    if assignment not in ASSIGNMENTS:
        raise ValidationProblem("assignment", f"use one of {', '.join(ASSIGNMENTS)}")
    assignee_id = raw.get("assignee_id")
    if assignment == "user":
        assignee_id = inputs.optional_id(assignee_id)
        if assignee_id is None:
            raise ValidationProblem("assignee_id", "pick the member the tickets are assigned to")
    elif assignee_id not in (None, ""):
        raise ValidationProblem("assignee_id", "only with assignment 'user'")
    else:
        assignee_id = None
    q = inputs.line("q", str(raw.get("q") or ""), max_len=MAX_Q)
    return TicketFilter(
        status=_enum_list("status", raw.get("status"), TicketStatus),
        priority=_enum_list("priority", raw.get("priority"), Priority),
        assignment=assignment,
        assignee_id=assignee_id,
        q=q,
        sla=_sla(raw.get("sla")),
    )


def _sla(value: Any) -> str:
    if value in (None, ""):
        return ""
    up = str(value).strip().upper()
    if up not in FILTERABLE:
        raise ValidationProblem("sla", f"use one of {', '.join(FILTERABLE)}")
    return up


# pg_trgm sees only ASCII letters and digits as word characters in a database whose ctype is C
# (the embedded servers'), and needs three in a row to use its index at all.
_TRIGRAM_WORD = re.compile(r"[A-Za-z0-9]{3}")


def needs_bigrams(q: str) -> bool:
    """True when the trigram index cannot find `q` by itself: fewer than three ASCII word
    characters in a row (e.g. 退款, "ab"), or any other character. A one-character word has no
    bigram either, and is left to ILIKE alone."""
    return len(q) >= 2 and (not _TRIGRAM_WORD.search(q) or not q.isascii())


def to_pyformat(sql: str) -> str:
    """`:name` placeholders (SQLAlchemy text) → `%(name)s` (psycopg)."""
    return re.sub(r"(?<![:\w]):([a-z_]+)", r"%(\1)s", sql)


def like_pattern(q: str) -> str:
    escaped = q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def filter_sql(
    f: TicketFilter,
    *,
    team_id: int,
    me: int,
    creator_id: int | None,
    staff: bool,
    alias: str = "t",
    now: datetime | None = None,
) -> tuple[str, dict[str, Any]]:
    """WHERE clause (without the keyword) and parameters; `creator_id` scopes a customer.

    `sla` is read at `now` (required with it) and only for staff: a customer's filter on it
    (an export's owner demoted since, say) matches nothing, as a team without SLA would.

    `q` matches the title or the text of one of the ticket's messages: for `staff` any message,
    otherwise public ones only, so a customer's search never matches text that is only in an
    internal note (nor says that one exists). A redacted message matches nothing."""
    where = [f"{alias}.team_id = :team_id"]
    params: dict[str, Any] = {"team_id": team_id}
    if creator_id is not None:
        where.append(f"{alias}.creator_id = :creator_id")
        params["creator_id"] = creator_id
    if f.status:
        where.append(f"{alias}.status = ANY(:status)")
        params["status"] = list(f.status)
    if f.priority:
        where.append(f"{alias}.priority = ANY(:priority)")
        params["priority"] = list(f.priority)
    if f.assignment == "me":
        where.append(f"{alias}.assignee_id = :me")
        params["me"] = me
    elif f.assignment == "unassigned":
        where.append(f"{alias}.assignee_id IS NULL")
    elif f.assignment == "user":
        where.append(f"{alias}.assignee_id = :assignee_id")
        params["assignee_id"] = f.assignee_id
    if f.q:
        where.append(_q_sql(f.q, alias=alias, notes=staff and creator_id is None))
        params["q"] = like_pattern(f.q)
        if needs_bigrams(f.q):
            params["q_text"] = f.q
    if f.sla:
        if not staff or creator_id is not None:
            where.append("FALSE")
        else:
            if now is None:
                raise ValueError("an SLA filter is read at a given instant")
            sql, more = sla_sql(f.sla, alias, now)
            where.append(sql)
            params |= more
    return " AND ".join(where), params


def _q_sql(q: str, *, alias: str, notes: bool) -> str:
    """The ticket's id among those whose title matches or one of whose messages (with `notes`,
    internal ones too) does. One semi-join: a ticket matching twice comes once. Each side is read
    through its own index (pg_trgm, or for words it cannot serve the bigram indexes of migrations
    0010 and 0018, which only narrow: ILIKE decides); an OR of the title and an EXISTS would scan
    every ticket of the team."""
    bigrams = needs_bigrams(q)
    title = "s_t.title ILIKE :q"
    if bigrams:
        title += " AND taskdesk_bigrams(s_t.title) @> taskdesk_bigrams(:q_text)"
    body = "s_m.body ILIKE :q AND s_m.redacted_at IS NULL"
    if bigrams:
        body += " AND taskdesk_bigrams(s_m.body) @> taskdesk_bigrams(:q_text)"
    if not notes:
        body += " AND NOT s_m.internal"
    return (
        f"{alias}.id IN (SELECT s_t.id FROM ticket s_t WHERE s_t.team_id = :team_id AND {title} "
        "UNION ALL SELECT s_m.ticket_id FROM ticket_message s_m "
        f"WHERE s_m.team_id = :team_id AND {body})"
    )
