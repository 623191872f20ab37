"""How request-level failures reach GraphQL clients.

Request-level failures (no credentials, too many mutations, bad list arguments, an answer too
large) are GraphQL errors carrying `extensions.code`. Anything else is unexpected: logged with
the request id and, in production, masked. Expected failures of a mutation are not errors but
typed results (`schema.problems`).
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

import psycopg
from graphql import GraphQLError, GraphQLSyntaxError
from psycopg import errors as pgerr
from sqlalchemy import exc as saexc

from desk.core import errors

log = logging.getLogger("taskdesk.graphql")

INTERNAL = "INTERNAL_SERVER_ERROR"


def camel(name: str) -> str:
    """desk names fields in snake_case (assignee_id); clients know them as assigneeId."""
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def request_error(exc: errors.DeskError) -> GraphQLError:
    """A GraphQL error with `extensions.code` (and `field` for a bad argument)."""
    ext: dict[str, Any] = {"code": exc.code}
    if isinstance(exc, errors.ValidationProblem):
        ext["field"] = camel(exc.field)
    seconds = getattr(exc, "retry_after_seconds", None)
    if seconds is not None:  # a GraphQL answer is 200: the pages' Retry-After goes here instead
        ext["retryAfter"] = max(1, int(seconds))
    return GraphQLError(exc.message, extensions=ext)


RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
SERVICE_UNAVAILABLE = "SERVICE_UNAVAILABLE"
OVERLOADED = "OVERLOADED"  # answered by web/overload.py before GraphQL runs (503, Retry-After)
TIMEOUT = "TIMEOUT"
QUERY_TOO_COSTLY = "QUERY_TOO_COSTLY"


def too_large(limit: int) -> GraphQLError:
    message = (
        f"The answer would be larger than {limit / 2**20:.1f} MB; ask for fewer tickets or "
        "fields (smaller `first`, fewer aliases, no `body` in lists)."
    )
    return GraphQLError(message, extensions={"code": RESPONSE_TOO_LARGE, "limit": limit})


def fail(exc: errors.DeskError) -> NoReturn:
    raise request_error(exc) from None


def is_expected(error: GraphQLError) -> bool:
    """Parse/validation/coercion errors and our own coded errors are safe to show as they are."""
    orig = error.original_error
    return orig is None or isinstance(orig, (GraphQLError, errors.DeskError))


def error_code(error: GraphQLError) -> str:
    if error.extensions and "code" in error.extensions:
        return str(error.extensions["code"])
    orig = error.original_error
    if isinstance(orig, errors.DeskError):
        return orig.code
    if isinstance(error, GraphQLSyntaxError):
        return "GRAPHQL_PARSE_FAILED"
    if error.path is None:  # before execution: the document or its variables
        return "GRAPHQL_VALIDATION_FAILED" if orig is None else "BAD_USER_INPUT"
    return "BAD_USER_INPUT" if is_expected(error) else INTERNAL


def formatted(error: GraphQLError) -> dict[str, Any]:
    """The JSON form of an error, always with `extensions.code`."""
    out = error.formatted
    out["extensions"] = {**(out.get("extensions") or {}), "code": error_code(error)}
    return dict(out)


def log_errors(errors_: list[GraphQLError], request_id: str) -> None:
    for error in errors_:
        if is_expected(error):
            log.debug("graphql [%s] %s", request_id, error.message)
        elif database_trouble(error.original_error) is not None:
            log.warning("graphql [%s] database trouble at %s: %s", request_id, error.path, error)
        else:
            log.error(
                "graphql [%s] unexpected error at %s: %s",
                request_id,
                error.path,
                error.message,
                exc_info=error.original_error,
            )


def masked_message(request_id: str) -> str:
    return f"Unexpected error; quote request id {request_id} when you report it."


UNAVAILABLE_MESSAGE = "The database is unavailable right now; try again in a few seconds."
TIMEOUT_MESSAGE = (
    "This took too long and was stopped; ask for less (smaller `first`, fewer fields)."
)
RETRY_AFTER_SECONDS = 5


def database_trouble(exc: BaseException | None) -> str | None:
    """SERVICE_UNAVAILABLE for an outage or a pool with no free connection, TIMEOUT for a
    statement cancelled by the statement timeout, None for anything else."""
    if isinstance(exc, saexc.DBAPIError):
        if exc.connection_invalidated:
            return SERVICE_UNAVAILABLE
        exc = exc.orig
    if isinstance(exc, pgerr.QueryCanceled):
        return TIMEOUT
    if isinstance(exc, (saexc.TimeoutError, saexc.InterfaceError, saexc.OperationalError)):
        return SERVICE_UNAVAILABLE  # the pool's own errors (no driver error inside)
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError, OSError, TimeoutError)):
        return SERVICE_UNAVAILABLE
    return None


def is_driver_error(exc: BaseException | None) -> bool:
    """Errors whose text may quote SQL, its parameters or the driver: never shown, in any env."""
    return isinstance(exc, (saexc.SQLAlchemyError, psycopg.Error, UnicodeError, OSError))


def masked(error: GraphQLError, request_id: str) -> GraphQLError:
    """An unexpected error reduced to the request id (it is logged in full) or, for database
    trouble, to its code and a plain message; expected errors unchanged."""
    if is_expected(error):
        return error
    trouble = database_trouble(error.original_error)
    if trouble is not None:
        message = UNAVAILABLE_MESSAGE if trouble == SERVICE_UNAVAILABLE else TIMEOUT_MESSAGE
        extensions: dict[str, Any] = {"code": trouble, "requestId": request_id}
    else:
        message, extensions = (
            masked_message(request_id),
            {"code": INTERNAL, "requestId": request_id},
        )
    return GraphQLError(
        message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions=extensions,
    )


def shown(error: GraphQLError, request_id: str, prod: bool) -> GraphQLError:
    """What a client sees: production masks every unexpected error; development shows them,
    except database and driver errors, whose text can carry SQL and parameters."""
    if prod or is_driver_error(error.original_error):
        return masked(error, request_id)
    return error
