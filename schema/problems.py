"""Expected failures as typed results, and the mutation runner that returns them.

A mutation's expected failures are union members (`NotFound`, `NotAllowed`,
`ValidationProblem`, `TooLarge`, `TaskConflict`, `QuotaExceeded`), all implementing `Problem`;
`attempt` runs a mutation and turns a domain failure into the member the mutation declares.
Request-level failures stay GraphQL errors (`schema.errors`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from desk.core import errors as desk_errors
from desk.core.errors import DeskError, RateLimited
from desk.people import throttle
from desk.reads import lookups
from schema.context import Context, ctx_of
from schema.errors import camel, fail
from schema.types import Task


@strawberry.interface(description="An expected failure: show `message` to the person.")
class Problem:
    message: str


@strawberry.type(description="Missing, or not yours to see: the two answer the same.")
class NotFound(Problem):
    pass


@strawberry.type(description="You can see this, but your role does not allow the action.")
class NotAllowed(Problem):
    pass


@strawberry.type(description="An argument is not acceptable; `field` names it.")
class ValidationProblem(Problem):
    field: str


@strawberry.type(
    description="Over a size cap (a file, a message's files, how many files): `field` names it."
)
class TooLarge(Problem):
    field: str


@strawberry.type(description="An identical task is already queued or running: follow that one.")
class TaskConflict(Problem):
    existing_task: Task


@strawberry.type(description="Too many exports for now; try again after `retryAfter`.")
class QuotaExceeded(Problem):
    retry_after: datetime
    message_key: str | None = strawberry.field(
        default=None,
        description="`message` as a stable key (e.g. quota.active_exports) for translating it.",
    )
    message_params: dict[str, Any] = strawberry.field(
        default_factory=dict,
        graphql_type=JSON,
        description="The figures `message` was written with.",
    )


@strawberry.type(
    description="A one-time link (invitation, password reset) that no longer works: `reason` is "
    "used, expired or revoked, and `message` says what to do."
)
class LinkGone(Problem):
    reason: str


def problem(exc: DeskError, *, now: datetime, user_id: int) -> Problem:
    """The union member for an expected domain failure."""
    if isinstance(exc, desk_errors.ValidationProblem):
        return ValidationProblem(message=exc.detail, field=camel(exc.field))
    if isinstance(exc, desk_errors.TooLarge):
        return TooLarge(message=exc.detail, field=camel(exc.field))
    if isinstance(exc, desk_errors.TaskConflict):
        if exc.existing is None:  # the other task finished in between: nothing to follow
            return ValidationProblem(message="A matching task just finished; try again.", field="")
        return TaskConflict(
            message=exc.message, existing_task=Task.from_model(exc.existing, now, user_id)
        )
    if isinstance(exc, desk_errors.QuotaExceeded):
        said = exc.text
        return QuotaExceeded(
            message=exc.message,
            retry_after=exc.retry_after,
            message_key=said.key if said else None,
            message_params=said.params if said else {},
        )
    if isinstance(exc, desk_errors.LinkGone):
        return LinkGone(message=exc.message, reason=exc.reason)
    if isinstance(exc, desk_errors.NotAllowed):
        return NotAllowed(message=exc.message)
    if isinstance(exc, desk_errors.NotFound):
        return NotFound(message=exc.message)
    raise exc  # Unauthenticated, RateLimited: request-level, not a result


async def mutation_caller(info: Info) -> tuple[Context, int]:
    """For every mutation: the caller (or UNAUTHENTICATED), counted against the per-user change
    budget that page form posts share (desk.people.throttle; RATE_LIMITED beyond it). Redis trouble
    lets the mutation through: triggers must keep working while Redis is down."""
    ctx = ctx_of(info)
    user_id = ctx.user_id
    try:
        await throttle.count_change(ctx.rt, user_id)
    except RateLimited as exc:
        fail(exc)
    return ctx, user_id


async def attempt(
    info: Info,
    action: Callable[[Context, int], Awaitable[object]],
    allowed: tuple[type, ...],
) -> object:
    """Run one mutation: rate-limited caller, then `action`; expected domain failures become the
    union member the mutation declares (anything else stays a coded GraphQL error)."""
    ctx, user_id = await mutation_caller(info)
    try:
        async with ctx.slot():
            return await action(ctx, user_id)
    except DeskError as exc:
        result = problem(exc, now=ctx.now(), user_id=user_id)
        if not isinstance(result, allowed):
            fail(exc)
        return result


async def attempt_anonymous(
    info: Info, action: Callable[[Context], Awaitable[object]], allowed: tuple[type, ...]
) -> object:
    """`attempt` for the few mutations a person uses before they can sign in (accepting an
    invitation, password resets): no caller needed, and their own throttles instead of the
    per-user change budget (a refusal is RATE_LIMITED, like the budget's)."""
    ctx = ctx_of(info)
    try:
        async with ctx.slot():
            return await action(ctx)
    except RateLimited as exc:
        fail(exc)
    except DeskError as exc:
        result = problem(exc, now=ctx.now(), user_id=0)
        if not isinstance(result, allowed):
            fail(exc)
        return result


T = TypeVar("T")
TEAM_MISSING = "Team not found."


def team_of(team_id: object) -> int:
    """A team id a client sent; a malformed one is NotFound, exactly as a team that does not
    exist (for a mutation's `action`, which `attempt` turns into its NotFound)."""
    team = lookups.parse_id(team_id)
    if team is None:
        raise desk_errors.NotFound(TEAM_MISSING)
    return team


async def team_query(
    info: Info, team_id: object, action: Callable[[Context, int, int], Awaitable[T]]
) -> T | NotFound:
    """A query about one team, `action(ctx, user_id, team)` in a slot; a malformed id, a team
    that does not exist and one the caller may not see all answer the same NotFound."""
    ctx = ctx_of(info)
    try:
        team = team_of(team_id)
        async with ctx.slot():
            return await action(ctx, ctx.user_id, team)
    except desk_errors.NotFound:
        return NotFound(message=TEAM_MISSING)
