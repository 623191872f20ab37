"""Server-written text as data: a stable key, its parameters, and the English it reads as.

The desk and the worker write texts people read later (a result summary, a skip reason, a quota
message, a reminder's notification, a task's failure reason). Each is recorded twice: the English sentence (the stable
`message` API clients and logs see) and a key with its parameters, so each face renders it in
its reader's language with numbers and times formatted for them (`ui.i18n` for the pages).

A template is a gettext msgid with `%(name)s` placeholders — the same string the pages'
catalog translates. Parameter names carry their type: `*_at` is an ISO-8601 UTC time, `status`
a ticket status (OPEN …), anything numeric a count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# key → English template; a tuple is (singular, plural, name of the count parameter).
Template = str | tuple[str, str, str]

TEMPLATES: dict[str, Template] = {
    "export.done": ("%(rows)s row exported.", "%(rows)s rows exported.", "rows"),
    "export.too_many_rows": "%(rows)s rows is more than the limit of %(limit)s; narrow the filters.",
    # A finish that found a cancel recorded before it (desk.ledger.finish).
    "export.cancelled_at_finish": "Cancelled while finishing; the file was discarded.",
    "import.cancelled_at_finish": "Cancelled while finishing; the rows already imported stay.",
    "reminder.cancelled_at_finish": "Cancelled while finishing; nobody was reminded.",
    "noop.cancelled_at_finish": "Cancelled while finishing.",
    "email.cancelled_at_finish": "Cancelled while sending; the message may have gone out.",
    "mail_fetch.cancelled_at_finish": "Cancelled while finishing.",  # the batches stay stored
    "mail_parse.cancelled_at_finish": "Cancelled while finishing.",  # what was read stays
    "sla_timer.cancelled_at_finish": "Cancelled while finishing.",
    "time_rule.cancelled_at_finish": "Cancelled while finishing; the tickets already acted on stay.",
    "import.done": (
        "%(created)s created, %(updated)s updated, %(unchanged)s unchanged, %(rejected)s rejected."
    ),
    "noop.done": "Done.",
    # jobs/limits.py: an attempt stopped at its kind's run-time limit.
    "task.ran_past_limit": "Ran past its limit of %(seconds)s s; stopped.",
    "reminder.reminded_assignee": "Reminded the assignee.",
    "reminder.reminded_staff": (
        "Reminded %(count)s team staff member (unassigned ticket).",
        "Reminded %(count)s team staff (unassigned ticket).",
        "count",
    ),
    "reminder.skipped.owner_left": (
        "Skipped: the person who set it is no longer on the team's staff."
    ),
    "reminder.skipped.ticket_gone": "Skipped: the ticket no longer exists.",
    "reminder.skipped.task_gone": "Skipped: the task no longer exists.",
    "reminder.skipped.stale": "Skipped: the reminder was rescheduled or cancelled.",
    "reminder.skipped.closed": ("Skipped: the ticket was %(status)s before the reminder was due."),
    "reminder.superseded": "Superseded by a reminder for %(due_at)s.",
    # A ticket's SLA timers (desk/work/sla_firing.py); `target` is the target's English name.
    "sla_timer.warned": (
        "Warned %(count)s person: the %(target)s target is due at %(due_at)s.",
        "Warned %(count)s people: the %(target)s target is due at %(due_at)s.",
        "count",
    ),
    "sla_timer.breached": (
        "Breached: the %(target)s target was due at %(due_at)s; %(count)s person notified.",
        "Breached: the %(target)s target was due at %(due_at)s; %(count)s people notified.",
        "count",
    ),
    "sla_timer.skipped.superseded": "Skipped: superseded (the ticket changed).",
    "sla_timer.skipped.policy": "Skipped: superseded (the team's SLA policy changed).",
    "sla_timer.skipped.already": "Skipped: already notified for this due time.",
    "sla_timer.skipped.closed": "Skipped: the ticket was %(status)s before the timer was due.",
    "sla_timer.skipped.ticket_gone": "Skipped: the ticket no longer exists.",
    "sla_timer.skipped.task_gone": "Skipped: the task no longer exists.",
    "sla_timer.replanned": (
        "Planned the SLA timers of %(count)s open ticket again.",
        "Planned the SLA timers of %(count)s open tickets again.",
        "count",
    ),
    "sla.warning": "SLA warning: ticket #%(ticket)s “%(title)s”: %(target)s due at %(due_at)s.",
    "sla.breach": "SLA breached: ticket #%(ticket)s “%(title)s”: %(target)s was due at %(due_at)s.",
    "reminder.notification": "Reminder: ticket #%(ticket)s “%(title)s” is still %(status)s.",
    "reminder.notification_note": (
        "Reminder: ticket #%(ticket)s “%(title)s” is still %(status)s. Note: %(note)s"
    ),
    # E-mail (desk/work/mail.py, jobs/processors/email.py); `reply` is the mail server's answer.
    "email.sent": "E-mail sent.",
    "email.rejected": 'The mail server refused the message: "%(reply)s"',
    "email.deferred": 'The mail server deferred the message: "%(reply)s"',
    "email.unreachable": 'Could not reach the mail server: "%(reply)s"',
    "email.no_server": "No mail server is configured (set SMTP_URL).",
    "export.ready": (
        "Export #%(task)s is ready: %(rows)s row, until %(expires_at)s.",
        "Export #%(task)s is ready: %(rows)s rows, until %(expires_at)s.",
        "rows",
    ),
    "quota.active_exports": (
        "You already have %(active)s export running; wait for it to finish.",
        "You already have %(active)s exports running; wait for one to finish.",
        "active",
    ),
    "quota.exports_per_hour": "At most %(limit)s exports an hour; try again after %(retry_at)s.",
    # Scheduled exports (desk/work/schedule_runs.py): why a schedule stopped, why an
    # occurrence made no task.
    "schedule.stopped.owner_removed": "Stopped: its owner is no longer a member of the team.",
    "schedule.stopped.owner_not_staff": (
        "Stopped: its owner is no longer staff or an admin of the team."
    ),
    "schedule.stopped.filters": "Stopped: its saved filters are no longer valid.",
    "schedule.skipped.running": (
        "Skipped: an export with the same filters was still queued or running."
    ),
    "schedule.skipped.quota": "Skipped: its owner had too many exports at the time.",
    "login.throttled": (
        "Too many sign-in attempts. Please wait %(minutes)s minute and try again.",
        "Too many sign-in attempts. Please wait %(minutes)s minutes and try again.",
        "minutes",
    ),
}


def msgids(template: Template) -> tuple[str, ...]:
    """The catalog entries a template needs (both forms of a plural)."""
    return template[:2] if isinstance(template, tuple) else (template,)


def english_param(name: str, value: Any) -> str:
    """How the stable English text writes a parameter (times in UTC, counts with commas)."""
    if name.endswith("_at") and isinstance(value, str):
        return f"{datetime.fromisoformat(value):%Y-%m-%d %H:%M} UTC"
    if name == "status" and isinstance(value, str):
        return value.lower()
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def pick_form(template: Template, params: dict[str, Any]) -> tuple[str, str, int] | str:
    if isinstance(template, str):
        return template
    singular, plural, count = template
    return singular, plural, int(params.get(count, 0))


@dataclass(frozen=True)
class Message:
    key: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.key not in TEMPLATES:
            raise KeyError(f"unknown message key {self.key!r}")

    @property
    def text(self) -> str:
        """The stable English sentence."""
        form = pick_form(TEMPLATES[self.key], self.params)
        if isinstance(form, tuple):
            singular, plural, n = form
            form = singular if n == 1 else plural
        return form % {k: english_param(k, v) for k, v in self.params.items()}


def message(key: str, **params: Any) -> Message:
    """`message("export.done", rows=17)`; datetimes become ISO strings (they are stored as JSON)."""
    clean = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in params.items()}
    return Message(key, clean)
