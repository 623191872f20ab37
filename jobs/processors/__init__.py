"""One processor per task kind."""

from __future__ import annotations

from jobs.execution import Processor
from jobs.processors import export, noop, reminder


def registry() -> dict[str, Processor]:
    return {"EXPORT": export.process, "REMINDER": reminder.process, "NOOP": noop.process}
