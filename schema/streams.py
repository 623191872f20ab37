"""GraphQL subscriptions over a WebSocket (graphql-transport-ws) and over server-sent events
(graphql-sse, its "distinct connections" mode), both at `/graphql` (docs/graphql.md,
"Subscriptions"). The resolvers are `schema.subscriptions`; this module is their transport.

Strawberry's own view and protocol code serve both (`strawberry.asgi.GraphQL` with
`BaseGraphQLTransportWSHandler` and `SSETransport`), subclassed for what taskdesk adds; queries
and mutations stay on the thin POST endpoint (`schema.app`; docs/architecture.md, "Adapters",
says why it is not Strawberry's), and only subscriptions are served here.

- Routing (`schema.app`): a WebSocket at /graphql, and a GET or POST /graphql whose `Accept`
  names `text/event-stream`, come here.
- Guards (`Guard`, the schema as Strawberry's code here sees it): the POST endpoint's, through
  the same `schema.executor.Runner` (token limit, limit rules, cost budget), subscriptions only;
  then the caller, the subscribe rate and the limits of `schema.live`; every error carries
  `extensions.code` and is masked in production as `schema.app` masks it.
- Sign-in (`schema.stream_auth`): see there; a WebSocket is refused with close code 4401 (4403
  for a session cookie from another site), an event stream with 401 (403).
- Keep-alives: a graphql-transport-ws `ping` every PING_SECONDS; a `: ping` comment on an event
  stream every HEARTBEAT_SECONDS (Strawberry's SSE heartbeat).
- The edge (web/edge.py) passes WebSockets straight through and gives an event stream's slot of
  the in-flight bound back once it answers (docs/architecture.md, "Overload"): a stream open for
  hours holds no slot.

What of Strawberry (pinned exactly in pyproject.toml) this builds on beyond its documented
hooks (`is_websocket_origin_allowed`, `graphql_transport_ws_handler_class`,
`stream_transport_classes_by_protocol`, `SSETransport(heartbeat_interval=)`): the view calls
only `stream` (and reads `config`) of the schema it is given, so `Guard` stands in for it; and
the handler's `handle_connection_init`, `shutdown`, `send_message`, `context`, `websocket`,
`connection_init_received` and `connection_acknowledged` keep their meaning. The tests of
tests/schema/test_subscriptions_ws.py and test_subscriptions_sse.py fail when one changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncGenerator, Iterable
from contextlib import aclosing
from datetime import timedelta
from typing import Any, cast

from cross_web import HTTPException
from graphql import GraphQLError
from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http.streaming import SSETransport
from strawberry.schema import BaseSchema
from strawberry.subscriptions import GRAPHQL_SSE_PROTOCOL, GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ConnectionInitMessage
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.execution import PreExecutionError
from strawberry.types.graphql import OperationType

from desk.core.errors import DeskError, Unauthenticated
from desk.core.settings import Settings
from schema.cost import estimate_cost
from schema.errors import (
    RETRY_AFTER_SECONDS,
    SERVICE_UNAVAILABLE,
    UNAVAILABLE_MESSAGE,
    database_trouble,
    error_code,
    request_error,
    shown,
)
from schema.executor import Runner
from schema.hardening import cost_error
from schema.live import Hub, StreamContext
from schema.root import DeskSchema
from schema.stream_auth import Refusal, sign_in
from web.edge import new_request_id

log = logging.getLogger("taskdesk.graphql")

PING_SECONDS = 15.0  # graphql-transport-ws pings; read when each is due (tests shorten it)
HEARTBEAT_SECONDS = 15.0  # `: ping` on an event stream; read when the view is built
INIT_WAIT = timedelta(seconds=10)  # a WebSocket that has not sent connection_init is closed
BAD_REQUEST = "BAD_REQUEST"
ONLY_SUBSCRIPTIONS = (
    "Only subscriptions are served over WebSocket and event streams; send queries and "
    "mutations with POST /graphql."
)


def _error(code: str, message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": code})


def _coded(error: GraphQLError) -> GraphQLError:
    """`error` with `extensions.code` (what `schema.errors.formatted` adds to a POST's answer)."""
    return GraphQLError(
        error.message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        original_error=error.original_error,
        extensions={**(error.extensions or {}), "code": error_code(error)},
    )


class Guard:
    """The schema as Strawberry's view and handler here see it: `stream` runs one subscription
    behind the POST endpoint's guards and this process's limits (see the module docstring)."""

    def __init__(self, schema: DeskSchema, runner: Runner, settings: Settings, prod: bool) -> None:
        self.schema, self.runner, self.prod = schema, runner, prod
        self.budget = settings.graphql_max_cost

    def __getattr__(self, name: str) -> Any:
        # What else Strawberry's view reads of its schema (`config`) is the schema's own.
        return getattr(self.schema, name)

    def refusal(
        self, query: str, variables: dict[str, Any] | None, name: str | None
    ) -> list[GraphQLError]:
        """What the document itself makes unacceptable here (cached per text by the runner)."""
        if not query.strip():
            return [_error(BAD_REQUEST, "`query` must be a non-empty string.")]
        prepared = self.runner.prepare(query)
        if prepared.document is None:
            return list(prepared.errors)
        operation = prepared.operations.get(name)
        if operation is None:
            return [
                _error(BAD_REQUEST, f"No operation named {name!r}." if name else "No operation.")
            ]
        if OperationType(operation.operation.value) is not OperationType.SUBSCRIPTION:
            return [_error(BAD_REQUEST, ONLY_SUBSCRIPTIONS)]
        if prepared.errors:
            return list(prepared.errors)
        cost, _ = estimate_cost(self.runner.graphql, operation, prepared.fragments, variables)
        too_costly = cost_error(cost, self.budget)
        return [too_costly] if too_costly else []

    def refused(
        self, query: str, variables: dict[str, Any] | None, name: str | None, ctx: StreamContext
    ) -> list[GraphQLError]:
        """`refusal`'s errors as the POST endpoint's runner hands them out: through the schema's
        error hook (in production without "Did you mean …?"; logged with the request id)."""
        errors = self.refusal(query, variables, name)
        if errors:
            execution = ExecutionContext(
                query=query, schema=self.schema, allowed_operations=(), context=ctx
            )
            self.schema.process_errors(errors, execution)
        return errors

    def shown(self, errors: Iterable[GraphQLError], ctx: StreamContext) -> list[GraphQLError]:
        return [_coded(shown(e, ctx.request_id, self.prod)) for e in errors]

    async def stream(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any = None,
        root_value: Any = None,
        operation_name: str | None = None,
        operation_extensions: dict[str, Any] | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
    ) -> AsyncGenerator[ExecutionResult, None]:
        """As Strawberry's `Schema.stream`, for subscriptions only."""
        return self._stream(query or "", variable_values, context_value, operation_name)

    async def _stream(
        self, query: str, variables: dict[str, Any] | None, on: StreamContext, name: str | None
    ) -> AsyncGenerator[ExecutionResult, None]:
        ctx = on.operation()  # loaders and budget of its own: see schema.live
        errors = self.refused(query, variables, name, ctx)
        user_id = None if errors else await self._admit(ctx, errors)
        if user_id is None:
            yield PreExecutionError(data=None, errors=self.shown(errors, ctx))
            return
        try:
            results = await self.schema.stream(
                query,
                variable_values=variables,
                context_value=ctx,
                operation_name=name,
                allowed_operation_types=(OperationType.SUBSCRIPTION,),
            )
            async with aclosing(results):
                async for result in results:
                    assert isinstance(result, ExecutionResult)  # no incremental frames here
                    if result.errors:
                        result = dataclasses.replace(result, errors=self.shown(result.errors, ctx))
                    yield result
        finally:
            assert ctx.live is not None
            ctx.live.leave(user_id)

    async def _admit(self, ctx: StreamContext, errors: list[GraphQLError]) -> int | None:
        """The subscriber's id once the subscription may start (signed in still, within the
        rate and the limits; `Connection.leave` frees its place), else None with `errors` told
        why."""
        try:
            if ctx.caller is None or ctx.live is None or ctx.live.credential is None:
                raise Unauthenticated()
            user_id = ctx.caller.user_id
            if await ctx.live.credential.user_id(ctx.rt) != user_id:
                raise Unauthenticated("Your session ended or your API token was revoked.")
            ctx.live.admit(user_id, ctx.rt.clock().timestamp())
            return user_id
        except DeskError as exc:
            errors.append(request_error(exc))
        except Exception as exc:
            if database_trouble(exc) is None:
                raise
            errors.append(_error(SERVICE_UNAVAILABLE, UNAVAILABLE_MESSAGE))
        return None


class Handler(BaseGraphQLTransportWSHandler[StreamContext, None]):
    """graphql-transport-ws as Strawberry speaks it, plus sign-in at `connection_init` and the
    server's pings."""

    view: Streams
    _pings: asyncio.Task[None] | None = None

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        if "payload" in message and message["payload"] is None:
            message = {"type": "connection_init"}  # `null`: no parameters (Strawberry wants {})
        payload = message.get("payload", {})
        if isinstance(payload, dict) and not self.connection_init_received:
            got = await sign_in(self.context, payload)
            if isinstance(got, Refusal):
                await self.websocket.close(got.close_code, got.reason)
                return
            assert self.context.live is not None
            self.context.live.credential = got
        await super().handle_connection_init(message)
        if self.connection_acknowledged and self._pings is None:
            self._pings = asyncio.create_task(self._ping())

    async def _ping(self) -> None:
        # The client answers `pong` (graphql-ws and gql do by themselves): a connection through
        # proxies that drop idle sockets stays open, and a dead one is noticed by the send.
        with contextlib.suppress(Exception):
            while True:
                await asyncio.sleep(PING_SECONDS)
                await self.send_message({"type": "ping"})

    async def shutdown(self) -> None:
        if self._pings is not None:
            self._pings.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pings
        await super().shutdown()
        if self.context.live is not None:
            self.context.live.close()


def _sse_transport(interval: float) -> type[SSETransport]:
    class Heartbeat(SSETransport):
        def __init__(self) -> None:
            super().__init__(heartbeat_interval=interval)

    return Heartbeat


def _refuse(status: int, code: str, message: str, rid: str) -> Response:
    """A refusal in the GraphQL error shape, as the POST endpoint refuses."""
    body = {"errors": [{"message": message, "extensions": {"code": code}}]}
    return _json(body, status, rid)


def _json(body: dict[str, Any], status: int, rid: str) -> Response:
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
    headers = {"X-Request-ID": rid, "Cache-Control": "no-store"}
    if status == 503:
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return Response(text, status_code=status, media_type="application/json", headers=headers)


Operation = tuple[str, dict[str, Any] | None, str | None]


async def _operation(request: Request) -> Operation | str:
    """(query, variables, operationName) of an event stream's request, or what is wrong."""
    try:
        if request.method == "GET":
            params = request.query_params
            raw = params.get("variables")
            data: Any = {
                "query": params.get("query"),
                "variables": json.loads(raw) if raw else None,
                "operationName": params.get("operationName"),
            }
        else:
            data = json.loads(await request.body())
    except (ValueError, RecursionError):
        return "The operation is not valid JSON."
    if not isinstance(data, dict):
        return "Send one operation as a JSON object."
    query, variables, name = data.get("query"), data.get("variables"), data.get("operationName")
    if not isinstance(query, str) or not isinstance(variables, dict | None):
        return "`query` must be a string and `variables` an object."
    return query, variables, name if isinstance(name, str) else None


class Streams(GraphQL[StreamContext, None]):
    """Strawberry's ASGI view, serving subscriptions only (see the module docstring)."""

    graphql_transport_ws_handler_class = Handler

    def __init__(self, schema: DeskSchema, runner: Runner, settings: Settings, prod: bool) -> None:
        self.guard = Guard(schema, runner, settings, prod)
        super().__init__(
            cast(BaseSchema, self.guard),
            graphql_ide=None,
            allow_queries_via_get=False,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_SSE_PROTOCOL),
            connection_init_wait_timeout=INIT_WAIT,
            max_subscriptions_per_connection=None,  # schema.live counts them, with codes
        )
        self.hub = Hub(settings)
        self.stream_transport_classes_by_protocol = {
            GRAPHQL_SSE_PROTOCOL: _sse_transport(HEARTBEAT_SECONDS)
        }

    def is_websocket_origin_allowed(self, request: WebSocket, origin: str) -> bool:
        # Any page may open the socket; only an API token signs it in from another origin
        # (schema.stream_auth checks the Origin when a session cookie is the credential).
        return True

    async def websocket(self, ws: WebSocket) -> None:
        """The WebSocket at /graphql."""
        ctx = StreamContext(
            rt=ws.app.state.runtime,
            request=ws,
            request_id=new_request_id(),
            live=self.hub.connection(),
        )
        await self.run(ws, context=ctx)

    async def event_stream(self, request: Request, rid: str) -> Response:
        """A GET or POST /graphql that accepts `text/event-stream`."""
        ctx = StreamContext(rt=request.app.state.runtime, request=request, request_id=rid)
        got = await sign_in(ctx, {})
        if isinstance(got, Refusal):
            return _refuse(got.status, got.code, got.reason, rid)
        assert ctx.caller is not None
        ctx.live = self.hub.connection(ctx.caller.user_id)
        ctx.live.credential = got
        early = await self._early(request, ctx)
        if early is not None:
            return early
        try:
            return await self.run(request, context=ctx)
        except HTTPException as exc:
            return _refuse(exc.status_code, BAD_REQUEST, exc.reason, rid)

    async def _early(self, request: Request, ctx: StreamContext) -> Response | None:
        """A refusal as an HTTP answer, before the stream starts: a bad request (400, or 415 for
        a body that is not JSON), a document this endpoint refuses (400), over a limit (429)."""
        rid = ctx.request_id
        if request.method == "POST":
            media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                msg = "Send the operation as JSON with Content-Type: application/json."
                return _refuse(415, "UNSUPPORTED_MEDIA_TYPE", msg, rid)
        operation = await _operation(request)
        if isinstance(operation, str):
            return _refuse(400, BAD_REQUEST, operation, rid)
        errors = self.guard.refused(*operation, ctx)
        if errors:
            body = {"data": None, "errors": [e.formatted for e in self.guard.shown(errors, ctx)]}
            return _json(body, 400, rid)
        assert ctx.live is not None and ctx.caller is not None
        try:
            ctx.live.check(ctx.caller.user_id, ctx.rt.clock().timestamp())
        except DeskError as exc:
            body = {"data": None, "errors": [request_error(exc).formatted]}
            return _json(body, exc.http_status, rid)
        return None
