"""`/graphql` over HTTP: a thin endpoint that runs operations through `schema.executor`.

Why not Strawberry's GraphQLRouter: on the hot status read (`task(id)`) its request handling
(a synchronous context getter in a thread pool, dependency injection, generic content
negotiation) cost more than the query itself (measured against a bare endpoint: 0.5x its
throughput at best, a thin route 0.64-0.70x; docs/architecture.md, "Polling", says why the
status read is the path every open page keeps asking). This endpoint does only what taskdesk
needs:

- POST with `Content-Type: application/json` only (no GET queries, no multipart, no form
  posts): a cross-site page cannot send that without a CORS preflight, which is never granted,
  so cookie-authenticated requests stay CSRF-safe.
- one operation per request (no batching), a bounded body, queries and mutations only.
- GET serves GraphiQL outside production, and 405 otherwise.
Every response carries `X-Request-ID`; unexpected errors are logged under it.

Subscriptions are `schema.streams`': the WebSocket at /graphql, and a GET or POST /graphql that
accepts `text/event-stream` (graphql-sse), are handed to it before anything here.
"""

from __future__ import annotations

import json
import logging
import secrets
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types.graphql import OperationType

from desk.core.settings import Env, Settings
from schema.context import Identify, build_context
from schema.errors import (
    INTERNAL,
    RETRY_AFTER_SECONDS,
    SERVICE_UNAVAILABLE,
    UNAVAILABLE_MESSAGE,
    database_trouble,
    formatted,
    masked_message,
    shown,
    too_large,
)
from schema.executor import Runner
from schema.graphiql import page as graphiql_page
from schema.hardening import LIMIT_RULES, PROD_RULES
from schema.root import build_schema
from schema.streams import Streams

log = logging.getLogger("taskdesk.graphql")

PATH = "/graphql"
ALLOWED_OPERATIONS = (OperationType.QUERY, OperationType.MUTATION)

WELCOME = """# taskdesk GraphQL
#
# Signed in on the taskdesk pages? Your session cookie works here as it is.
# Or paste an API token in the Headers tab below:
#   {"Authorization": "Bearer tdk_..."}
# Create one with the createApiToken mutation or `taskdesk tokens create`.
# Examples: docs/graphql.md
#
query Me {
  me {
    displayName
    memberships { role team { id name } }
  }
  unreadNotificationCount
}
"""


def _ide_html() -> str:
    # Vendored GraphiQL (no CDN): it must work on a network without internet.
    return graphiql_page(title="taskdesk GraphiQL", endpoint=PATH, query=WELCOME)


def _encode(body: dict[str, Any]) -> bytes:
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate echoed back (an error quoting the input)
        return json.dumps(body, separators=(",", ":")).encode()


def _json(body: dict[str, Any] | bytes, status: int, request_id: str, **headers: str) -> Response:
    return Response(
        body if isinstance(body, bytes) else _encode(body),
        status_code=status,
        media_type="application/json",
        headers={"X-Request-ID": request_id, "Cache-Control": "no-store", **headers},
    )


def _refuse(status: int, code: str, message: str, request_id: str, **headers: str) -> Response:
    """A request-level refusal in the GraphQL error shape, so clients parse one format."""
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    return _json(body, status, request_id, **headers)


Operation = tuple[str, dict[str, Any] | None, str | None]  # query, variables, operationName


def _payload(body: bytes) -> Operation | str:
    """(query, variables, operationName) from a request body, or what is wrong with it."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return "The body is not valid JSON."
    if not isinstance(data, dict):
        return "Send one operation as a JSON object; batches are not supported."
    query, variables, name = data.get("query"), data.get("variables"), data.get("operationName")
    if not isinstance(query, str) or not query.strip():
        return "`query` must be a non-empty string."
    if variables is not None and not isinstance(variables, dict):
        return "`variables` must be a JSON object."
    if name is not None and not isinstance(name, str):
        return "`operationName` must be a string."
    return query, variables, name


async def _operation(request: Request, rid: str) -> Operation | Response:
    """The operation in a request, or the refusal to send back."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        msg = "Send the operation as JSON with Content-Type: application/json."
        return _refuse(415, "UNSUPPORTED_MEDIA_TYPE", msg, rid)
    # A body over /graphql's cap (web.limits) is refused by the edge while it is read, declared
    # or chunked: one limit and one message, never a second count here.
    body = await request.body()
    parsed = _payload(body)
    return _refuse(400, "BAD_REQUEST", parsed, rid) if isinstance(parsed, str) else parsed


async def _post(
    request: Request, runner: Runner, identify: Identify, rid: str, prod: bool
) -> Response:
    operation = await _operation(request, rid)
    if isinstance(operation, Response):
        return operation
    query, variables, name = operation
    state = request.app.state
    try:
        task_id = status_read(runner, query, variables, name)
        accepting = task_id is None and runner.accepting(query, name)
        context = await build_context(
            state.runtime, request, rid, identify, task_id, accepting=accepting
        )
        budget = context.rt.settings.graphql_max_cost
        result = await runner.run(query, variables, context, name, ALLOWED_OPERATIONS, budget)
    except (MissingQueryError, CannotGetOperationTypeError) as exc:
        reason = getattr(exc, "as_http_error_reason", lambda: "No operation to run.")()
        return _refuse(400, "BAD_REQUEST", reason, rid)
    except InvalidOperationTypeError:
        msg = (
            "Only queries and mutations are served here; subscriptions over a WebSocket or "
            "with Accept: text/event-stream."
        )
        return _refuse(400, "BAD_REQUEST", msg, rid)
    except Exception as exc:
        if database_trouble(exc) == SERVICE_UNAVAILABLE:  # e.g. identifying the caller
            log.warning("graphql [%s] database unavailable: %s", rid, exc)
            return _unavailable(rid)
        log.exception("graphql [%s] request failed", rid)
        return _refuse(500, INTERNAL, masked_message(rid), rid)
    return _answer(result.data, result.errors or [], rid, prod, state.settings)


def status_read(
    runner: Runner, query: str, variables: dict[str, Any] | None, name: str | None
) -> int | None:
    """The task id when the operation is only `task(id: …)` (the status read every open page
    polls), else None: then the caller and the task are read in one statement, not two. The
    shape is `schema.status_read.plan`'s, on the runner's cached parse of the document."""
    return runner.status_read(query, variables, name)


def _unavailable(rid: str) -> Response:
    retry = str(RETRY_AFTER_SECONDS)
    return _refuse(503, SERVICE_UNAVAILABLE, UNAVAILABLE_MESSAGE, rid, **{"Retry-After": retry})


def _answer(
    data: dict[str, Any] | None, errors: list[Any], rid: str, prod: bool, settings: Settings
) -> Response:
    out: dict[str, Any] = {"data": data}
    headers: dict[str, str] = {}
    if errors:
        # Production's last guard: an error the extension did not see (one raised outside the
        # operation) is masked here too; no environment shows database or driver text.
        out["errors"] = [formatted(shown(e, rid, prod)) for e in errors]
        codes = {e["extensions"]["code"] for e in out["errors"]}
        if SERVICE_UNAVAILABLE in codes:
            headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
            if codes == {SERVICE_UNAVAILABLE} and not any((data or {}).values()):
                return _json(out, 503, rid, **headers)  # nothing answered: all of it is down
    body = _encode(out)
    limit = settings.graphql_max_response_bytes
    if len(body) > limit:  # the last guard; fields count their text as they read it
        error = too_large(limit)
        return _json({"data": None, "errors": [formatted(error)]}, 200, rid)
    return _json(body, 200, rid, **headers)


def graphql_router(settings: Settings, identify: Identify) -> APIRouter:
    """The `/graphql` route for the app factory to include; `identify` tells who calls (the
    app's session cookie and API tokens). Reads go through the Runtime (`rt.pg`, desk.reads.tasks)."""
    prod = settings.taskdesk_env is Env.PROD
    schema = build_schema(prod)
    runner = Runner(schema, PROD_RULES if prod else LIMIT_RULES)
    streams = Streams(schema, runner, settings, prod)  # subscriptions, behind the same guards
    ide = None if prod else _ide_html()

    async def graphql(request: Request) -> Response:
        rid = getattr(request.state, "request_id", None) or secrets.token_hex(6)  # web/observe.py
        if "text/event-stream" in request.headers.get("accept", ""):
            return await streams.event_stream(request, rid)
        if request.method == "POST":
            return await _post(request, runner, identify, rid, prod)
        if ide is not None and "text/html" in request.headers.get("accept", ""):
            return HTMLResponse(ide, headers={"Cache-Control": "no-store"})
        msg = "Use POST with a JSON body; queries over GET are not accepted."
        return _refuse(405, "METHOD_NOT_ALLOWED", msg, rid, Allow="POST")

    router = APIRouter()
    # A plain Starlette route: no dependency injection on the hot path.
    router.add_route(PATH, graphql, methods=["GET", "POST"], include_in_schema=False)
    router.add_websocket_route(PATH, streams.websocket)
    return router
