"""Expected failures of the domain. Each class's docstring is its default message.

GraphQL turns them into typed union results or error codes, the pages into 4xx answers; the
worker's job outcomes live in `jobs/outcomes.py`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from desk.core import metrics
from desk.core.messages import Message


class DeskError(Exception):
    """Something went wrong."""

    code = "ERROR"
    http_status = 400

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (self.__doc__ or "").strip()
        super().__init__(self.message)


class NotFound(DeskError):
    """Not found."""

    code = "NOT_FOUND"
    http_status = 404


class Unauthenticated(DeskError):
    """Sign in first: no valid session or API token."""

    code = "UNAUTHENTICATED"
    http_status = 401


class NotAllowed(DeskError):
    """Your role does not allow this action."""

    code = "FORBIDDEN"
    http_status = 403


class ValidationProblem(DeskError):
    """A value is not acceptable."""

    code = "VALIDATION"
    http_status = 422

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")
        self.detail = message


class TooLarge(DeskError):
    """Too large: send a smaller file or fewer of them."""

    code = "TOO_LARGE"
    http_status = 413

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")
        self.detail = message


class TaskConflict(DeskError):
    """An identical task is already queued or running; follow that one."""

    code = "TASK_CONFLICT"
    http_status = 409

    def __init__(self, existing: Any, message: str | None = None) -> None:
        self.existing = existing  # the BackgroundTask row to attach to
        super().__init__(message)
        metrics.refused("conflict", getattr(existing, "kind", None))


class IdempotencyKeyReused(ValidationProblem):
    """The same idempotency key came with a different request (Stripe's rule: one key, one
    request). A ValidationProblem of the field, so every face already knows how to show it;
    over HTTP a 409, as the key is in use (a well-formed request conflicting with an earlier
    one, not a value to fix: generated clients and fuzzers treat 422 as "my request was bad")."""

    code = "IDEMPOTENCY_KEY_REUSED"
    http_status = 409

    def __init__(self, field: str = "idempotency_key") -> None:
        super().__init__(
            field,
            "this key was already used for a different request; send a new key for a new request",
        )


class QuotaExceeded(DeskError):
    """Too many exports: try again later."""

    code = "QUOTA_EXCEEDED"
    http_status = 429

    def __init__(self, retry_after: datetime, message: str | Message | None = None) -> None:
        self.retry_after = retry_after
        # The English message for APIs, plus its key and parameters for the pages.
        self.text = message if isinstance(message, Message) else None
        super().__init__(message.text if isinstance(message, Message) else message)
        metrics.refused("quota", "EXPORT")  # only exports have quotas


class RateLimited(DeskError):
    """Too many requests: slow down and try again in a minute."""

    code = "RATE_LIMITED"
    http_status = 429


class LinkGone(DeskError):
    """This link no longer works."""

    code = "LINK_GONE"
    http_status = 410

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason  # "used", "expired" or "revoked": what happened to the link
        super().__init__(message)
