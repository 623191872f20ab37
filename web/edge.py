"""The one ASGI layer at the edge: everything every HTTP request gets, in one pass
(docs/architecture.md, "Overload").

For each HTTP request, in this order (lifespan, websockets and other scopes pass straight by):
1. its arrival time, `state["arrived_at"]`, from the runtime's injected clock;
2. the in-flight bound (web/overload.py `Bound`, adapted to how soon answers start): beyond it,
   503 + Retry-After before any other work, without a log line; /health, /metrics and /static/
   never count;
3. its request id (web/observe.py), bound for logging and sent back in `X-Request-ID`;
4. the body cap (web/limits.py), counted while the body is read;
5. the security headers (web/headers.py) on the answer;
6. the polled fragments' handlers (ui.watch.polled), called before the router;
7. its duration metric and its log line, by route template (web/observe.py); a client that
   went away before its body was read (a malformed chunk, a dropped connection: the server
   has answered or cannot) is logged as 499, not as the app's 500 with a traceback.

Those modules keep the rules (the limits, the policies, the refusal's bodies, the id's syntax);
this one applies them with a single send wrapper instead of one per layer, with what every
answer gets built once (the header lists, the histogram's labelled children).
tests/api/test_edge.py pins its answers: status, every header in its order, the body.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from random import getrandbits
from typing import Any

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desk.core import logs, metrics, tracing
from desk.core.settings import Settings
from web import headers as sec
from web import limits, observe, overload

log = logging.getLogger("taskdesk.http")
REQUEST_ID = b"x-request-id"
CLIENT_GONE = 499  # "client closed request", as nginx logs it: the client left before its answer
# The polled fragments' handlers: (scope, receive) -> the answer (a `Raw` or an ASGI app), or
# None for a request they do not answer.
Short = Callable[[Scope, Receive], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Raw:
    """An answer as bytes: `headers` are the app's own (none of the security headers, no
    X-Request-ID: the edge adds those)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """As an ASGI answer (the route's way, without the edge)."""
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


def new_request_id() -> str:
    # 12 hex digits, as secrets.token_hex(6) gave: an id names a request in the logs and guards
    # nothing, so it needs no system entropy (a syscall) per request.
    return f"{getrandbits(48):012x}"


def request_id_from(scope: Scope) -> str:
    """The caller's `X-Request-ID` when it is sane (observe.SANE_ID), else a new one."""
    for name, value in scope["headers"]:
        if name == REQUEST_ID:
            text = value.decode("latin-1")
            return str(text) if observe.SANE_ID.fullmatch(text) else new_request_id()
    return new_request_id()


class Edge:
    """Pure ASGI (no BaseHTTPMiddleware: it would cost a task and a queue per request)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        prod: bool,
        short: Short | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.app = app
        self.timer = timer  # monotonic seconds: durations and the bound's answer times
        self.settings = settings
        self.prod = prod
        self.short = short
        self.bound = overload.Bound(
            settings.web_max_in_flight,
            settings.web_min_in_flight,
            settings.web_target_latency_ms / 1000,
        )
        self.in_flight = 0
        hsts = [sec.HSTS] if prod else []  # prod is served over HTTPS (its cookies are Secure)
        self.extra = {
            csp: [*sec.COMMON, (b"content-security-policy", csp.encode()), *hsts]
            for csp in (sec.PAGES_CSP, sec.GRAPHIQL_CSP, sec.API_DOCS_CSP)
        }
        self.extra_names = frozenset(name for extra in self.extra.values() for name, _ in extra)
        self._timers: dict[tuple[str, str, int], Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        if "arrived_at" not in state:
            rt = getattr(getattr(scope.get("app"), "state", None), "runtime", None)
            if rt is not None:  # None only before the lifespan opened the runtime
                state["arrived_at"] = rt.clock()
        path = scope["path"]
        if overload.exempt(path):
            await self._serve(scope, receive, send, state)
            return
        if not self.bound.admits(self.in_flight, overload.urgent(scope)):
            metrics.overloaded("graphql" if path == "/graphql" else "page")
            await overload.refuse(scope, send)
            return
        # No await between the check and the increment: one event loop, so no race. The
        # exchange gives the slot back (`Exchange.release`) when it ends, or earlier when it
        # turns out to be a stream.
        self.in_flight += 1
        await self._serve(scope, receive, send, state, counted=True)

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, state: Any, counted: bool = False
    ) -> None:
        rid = request_id_from(scope)
        state["request_id"] = rid
        token = logs.bind(request_id=rid)
        # Production serves neither GraphiQL nor the API docs: no answer there needs inline code.
        extra = self.extra[sec.PAGES_CSP if self.prod else sec.policy(scope["path"])]
        x = Exchange(self, scope, receive, send, extra, (REQUEST_ID, rid.encode()))
        began = x.began = self.timer()
        x.holds = counted
        # A poll's wait tells the bound how long the queue is; a mutation's time is mostly its
        # own work (a lock, an insert, a commit), and judging polls by it turned them away for
        # a click's sake (web/overload.py).
        x.counted = counted and not overload.urgent(scope)
        try:
            if tracing.enabled():
                await self._traced(x)
            else:
                await self._dispatch(x)
        except ClientDisconnect:
            x.status = CLIENT_GONE  # nobody to answer: uvicorn already did, or the socket is gone
        finally:
            x.release()
            seconds = self.timer() - began
            route = observe.route_template(scope)
            self._timed(scope["method"], route, x.status, seconds)
            log.info(
                "%s %s %s %.1f ms",
                scope["method"],
                scope["path"],
                x.status,
                seconds * 1000,
                extra={"event": "http", "route": route},
            )
            logs.reset(token)

    async def _dispatch(self, x: Exchange) -> None:
        """The short way's answer when it gives one, else the app's."""
        if self.short is not None:
            got = await self.short(x.scope, x.receive)
            if got is not None:
                await x.answer(got)
                return
        await self.app(x.scope, x.receive, x.send)

    async def _traced(self, x: Exchange) -> None:
        method = x.scope["method"]
        with tracing.server_span(method, _header(x.scope, b"traceparent")) as span:
            await self._dispatch(x)
            if span is not None:
                span.update_name(f"HTTP {method} {observe.route_template(x.scope)}")
                span.set_attribute("http.response.status_code", x.status)

    def _timed(self, method: str, route: str, status: int, seconds: float) -> None:
        # The labelled child once per (method, route, status): `labels()` validates and locks.
        key = (method, route, status)
        timer = self._timers.get(key)
        if timer is None:
            timer = self._timers[key] = metrics.HTTP_DURATION.labels(method, route, str(status))
        timer.observe(seconds)


class Exchange:
    """One request's receive and send as the edge sees them: the body counted against its cap,
    the answer's status kept for the log, its headers completed once."""

    __slots__ = (
        "allowed",
        "began",
        "counted",
        "cut",
        "declared",
        "edge",
        "extra",
        "holds",
        "inner_receive",
        "inner_send",
        "named",
        "rid",
        "scope",
        "seen",
        "status",
        "what",
    )

    def __init__(
        self,
        edge: Edge,
        scope: Scope,
        receive: Receive,
        send: Send,
        extra: list[tuple[bytes, bytes]],
        rid: tuple[bytes, bytes],
    ) -> None:
        self.edge, self.scope, self.inner_receive, self.inner_send = edge, scope, receive, send
        self.extra, self.rid = extra, rid
        self.status = 500  # what an exception escaping the app becomes
        self.began, self.counted, self.holds = 0.0, False, False
        self.cut = False
        self.allowed = -1  # the route's limit, looked up at the first read (most GETs: never)
        self.named, self.what, self.seen = 0, "", 0
        self.declared: int | None = None

    async def receive(self) -> Message:
        if self.allowed < 0:
            self.allowed, self.named, self.what = limits.route_limit(
                self.edge.settings, self.scope["path"]
            )
            self.declared = limits.declared_length(self.scope)
        if self.declared is not None and self.declared > self.allowed:
            self.cut = True
            raise limits.BodyTooLarge(self.named, self.what)
        message = await self.inner_receive()
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            if self.seen > self.allowed:
                self.cut = True
                raise limits.BodyTooLarge(self.named, self.what)
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            message["headers"] = self._headers(message.get("headers", []))
            self._started()
            if self.holds and _streams(message["headers"]):
                # An event stream (SSE) lasts as long as its reader: once it is answering, it
                # is not a request in flight, and must not hold a slot of the bound for hours.
                self.release()
        await self.inner_send(message)

    def release(self) -> None:
        """Give this exchange's slot of the in-flight bound back, once."""
        if self.holds:
            self.holds = False
            self.edge.in_flight -= 1

    def _started(self) -> None:
        """The answer's first byte: how long it took tells the bound (a download streaming its
        body for seconds is not a slow answer)."""
        if self.counted:
            now = self.edge.timer()
            self.edge.bound.seen(now - self.began, now)

    def _headers(self, given: Any) -> list[tuple[bytes, bytes]]:
        """The app's headers (without an X-Request-ID of its own: GraphQL sets the same one),
        `Connection: close` after a cut body, the security headers it did not set, our id."""
        out = []
        clash = False
        names = self.edge.extra_names
        for header in given:
            name = header[0].lower()
            if name == REQUEST_ID:
                continue
            clash = clash or name in names
            out.append(header)
        if self.cut:
            # A body cut off is unread on the socket: `Connection: close` makes the server drop
            # the connection after the answer instead of reading (and discarding) the rest.
            out.append((b"connection", b"close"))
        if clash:
            present = {header[0].lower() for header in out}
            out += [(k, v) for k, v in self.extra if k not in present]
        else:
            out += self.extra
        out.append(self.rid)
        return out

    async def answer(self, got: Any) -> None:
        """Send the short way's answer: a `Raw` one as it is, anything else (a starlette
        Response) as the app's answers go, through `send`."""
        if isinstance(got, Raw):
            self.status = got.status
            headers = [*got.headers, *self.extra, self.rid]  # Raw's own: none of these names
            self._started()
            await self.inner_send(
                {"type": "http.response.start", "status": got.status, "headers": headers}
            )
            await self.inner_send({"type": "http.response.body", "body": got.body})
            return
        await got(self.scope, self.receive, self.send)


def _streams(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        k.lower() == b"content-type" and v.startswith(b"text/event-stream") for k, v in headers
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None
