"""One processor per task kind."""

from __future__ import annotations

from jobs.execution import Processor
from jobs.processors import (
    email,
    export,
    imports,
    mailbox,
    noop,
    reminder,
    sla_timer,
    time_rule,
)


def registry() -> dict[str, Processor]:
    return {
        "EXPORT": export.process,
        "REMINDER": reminder.process,
        "IMPORT": imports.process,
        "NOOP": noop.process,
        "EMAIL": email.process,
        "MAIL_FETCH": mailbox.process_fetch,
        "MAIL_PARSE": mailbox.process_parse,
        "TIME_RULE": time_rule.process,
        "SLA_TIMER": sla_timer.process,
    }
