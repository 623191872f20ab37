"""A team's SLA policy as its faces write and show it (docs/architecture.md, "Business hours",
"SLA faces"): targets in whole minutes, the week as day → spans, holidays as ISO dates.

`docs()` turns that into the JSON `desk.helpdesk.sla_store` keeps (targets in seconds), after
checking what only the faces say (minutes); `sla_store.parse` checks the rest when it is saved,
naming the part to fix. `shown()` is the way back, for a form or an answer. GraphQL, REST and
the page all go through these two, so the three faces accept and show the same policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from desk.core import inputs
from desk.core.errors import ValidationProblem
from desk.helpdesk.business_hours import DAYS
from desk.helpdesk.sla import TARGETS
from desk.helpdesk.sla_store import MAX_SECONDS, PRIORITIES, StoredPolicy

MAX_MINUTES = MAX_SECONDS // 60


@dataclass(frozen=True)
class PolicyForm:
    """What a face submits or shows."""

    zone: str
    hours: dict[str, list[str]]  # day (mon … sun) → "09:00-17:00" spans; a missing day closed
    holidays: list[str]
    minutes: dict[str, dict[str, int]]  # target → priority → whole minutes
    warn_share: float = 0.75


def minutes_of(target: str, priority: str, value: Any) -> int:
    """A target's minutes as a face wrote them; ValidationProblem naming the target."""
    try:  # the edge's own integer check: ASCII digits only (no `²`, no 5,000 digits)
        minutes = inputs.integer(target, value, hi=2**63)
    except ValidationProblem:
        raise ValidationProblem(target, f"{priority}: give whole minutes, e.g. 60") from None
    if not 1 <= minutes <= MAX_MINUTES:
        raise ValidationProblem(target, f"{priority}: between 1 and {MAX_MINUTES} minutes")
    return minutes


def docs(form: PolicyForm) -> tuple[dict[str, Any], dict[str, dict[str, int]]]:
    """(calendar, targets) as `sla_store.save` takes them; the minutes checked here."""
    targets: dict[str, dict[str, int]] = {}
    for target, by_priority in form.minutes.items():
        if target not in TARGETS:
            raise ValidationProblem(
                "targets", f"unknown target {target!r}; use {', '.join(TARGETS)}"
            )
        for priority, value in by_priority.items():
            if priority not in PRIORITIES:
                raise ValidationProblem(
                    target, f"unknown priority {priority!r}; use {', '.join(PRIORITIES)}"
                )
            targets.setdefault(target, {})[priority] = minutes_of(target, priority, value) * 60
    calendar = {"zone": form.zone.strip(), "hours": form.hours, "holidays": form.holidays}
    return calendar, targets


def shown(stored: StoredPolicy) -> PolicyForm:
    """The stored policy as the faces show it (minutes; days in week order)."""
    cal = stored.calendar_doc
    hours = cal.get("hours") or {}
    minutes = {
        target: {p: s // 60 for p, s in sorted(by.items(), key=lambda i: PRIORITIES.index(i[0]))}
        for target, by in sorted(stored.targets_doc.items(), key=lambda i: TARGETS.index(i[0]))
    }
    return PolicyForm(
        zone=str(cal.get("zone") or ""),
        hours={day: list(hours[day]) for day in DAYS if hours.get(day)},
        holidays=list(cal.get("holidays") or []),
        minutes=minutes,
        warn_share=stored.warn_share,
    )


def spans_of(text: str) -> list[str]:
    """A day's spans as a form field writes them: "09:00-12:00, 13:00-17:00" (commas or
    spaces between); empty: closed."""
    return [part for part in text.replace(",", " ").split() if part]


def holidays_of(text: str) -> list[str]:
    """Holidays as a form field writes them: ISO dates separated by commas, spaces or lines."""
    return spans_of(text)


def share_of(value: Any, *, percent: bool = False) -> float:
    """The warn share as a face wrote it: 0.75, or with `percent` (a page's field) 75."""
    try:
        share = float(value)
    except (TypeError, ValueError):
        example = "75" if percent else "0.75"
        raise ValidationProblem("warn_share", f"give a number such as {example}") from None
    if percent:
        share /= 100
    if not 0 < share < 1:
        say = "between 1 and 99 %, e.g. 75" if percent else "between 0 and 1, e.g. 0.75"
        raise ValidationProblem("warn_share", f"warn at a share {say}")
    return share


def hours_of(pairs: Iterable[tuple[str, Iterable[str]]]) -> dict[str, list[str]]:
    """Day → spans from (day, spans) pairs, a day named twice merged; days lower-cased."""
    out: dict[str, list[str]] = {}
    for day, spans in pairs:
        out.setdefault(day.strip().lower(), []).extend(spans)
    return out


def flat_minutes(minutes: Mapping[str, Mapping[str, int]]) -> list[tuple[str, str, int]]:
    """(target, priority, minutes) in target and priority order: a list a face can show."""
    return [(t, p, minutes[t][p]) for t in TARGETS for p in PRIORITIES if p in minutes.get(t, {})]
