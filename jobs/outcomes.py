"""How a processor ends early. One base class; each docstring is the default message."""

from __future__ import annotations

from typing import Any

from desk.core.messages import Message, message


class JobOutcome(Exception):
    """The task ended early."""

    def __init__(self, message: str | Message | None = None) -> None:
        # A `Message` keeps its key and figures beside the English, for the reader's language.
        self.key: str | None = None
        self.params: dict[str, Any] = {}
        if isinstance(message, Message):
            self.key, self.params, message = message.key, message.params, message.text
        self.message = message or (type(self).__doc__ or "").strip()
        super().__init__(self.message)


class RetryLater(JobOutcome):
    """A temporary problem; the task will be tried again."""


class Permanent(JobOutcome):
    """This task cannot succeed; trying again would not help."""


class Cancelled(JobOutcome):
    """Cancelled on request."""


class CancelledAtFinish(JobOutcome):
    """Cancelled while finishing: the finish found the cancel and discarded the result."""


class LostFence(JobOutcome):
    """Another execution owns this task now; this one's work is discarded."""


class DatabaseUnreachable(JobOutcome):
    """Database unreachable for longer than the task's lease."""

    def __init__(self, cause: str = "") -> None:
        base = (type(self).__doc__ or "").strip().rstrip(".")
        super().__init__(f"{base}: {cause}" if cause else f"{base}.")


class RanPastLimit(RetryLater):
    """The attempt ran past its kind's run-time limit and was stopped (jobs/limits.py)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(message("task.ran_past_limit", seconds=round(seconds)))
        self.seconds = seconds
