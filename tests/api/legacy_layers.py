"""The four edge layers as they were before web/edge.py merged them (main at c692358, copied
verbatim apart from imports): the reference tests/api/test_edge.py holds the merged layer to,
answer for answer, byte for byte. Test code only; nothing in the product imports it."""

from __future__ import annotations

import logging
import re
import secrets
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desk.core import logs, metrics, tracing
from desk.core.settings import Settings
from web.headers import (
    API_DOCS,
    API_DOCS_CSP,
    COMMON,
    GRAPHIQL_CSP,
    GRAPHIQL_FILES,
    HSTS,
    PAGES_CSP,
)
from web.limits import BodyTooLarge, route_limit
from web.observe import route_template
from web.overload import exempt, refuse

log = logging.getLogger("taskdesk.http")
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def request_id_from(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            if SANE_ID.fullmatch(text):
                return str(text)
            break
    return secrets.token_hex(6)  # 12 hex digits, as GraphQL's answers always had


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class Observe:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id_from(scope)
        scope.setdefault("state", {})["request_id"] = rid
        token = logs.bind(request_id=rid)
        status = 500  # what an exception escaping the app becomes
        began = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # One X-Request-ID, ours (GraphQL sets the same one; drop its copy).
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
                headers.append((b"x-request-id", rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        method = scope.get("method", "GET")
        try:
            with tracing.server_span(method, _header(scope, b"traceparent")) as span:
                await self.app(scope, receive, send_with_id)
                if span is not None:
                    span.update_name(f"HTTP {method} {route_template(scope)}")
                    span.set_attribute("http.response.status_code", status)
        finally:
            seconds = time.perf_counter() - began
            route = route_template(scope)
            metrics.http_request(method, route, status, seconds)
            log.info(
                "%s %s %s %.1f ms",
                method,
                scope.get("path", ""),
                status,
                seconds * 1000,
                extra={"event": "http", "route": route},
            )
            logs.reset(token)


class SecurityHeaders:
    def __init__(self, app: ASGIApp, *, prod: bool) -> None:
        self.app = app
        self.prod = prod
        # Built once: every answer gets one of these three lists (no encoding per request).
        self._extra = {
            csp: [*COMMON, (b"content-security-policy", csp.encode())] + ([HSTS] if prod else [])
            for csp in (PAGES_CSP, GRAPHIQL_CSP, API_DOCS_CSP)
        }  # HSTS: prod is served over HTTPS (its cookies are Secure)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Production serves neither GraphiQL nor the API docs: no answer there needs inline code.
        extra = self._extra[PAGES_CSP if self.prod else _policy(scope["path"])]

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                added = [(k, v) for k, v in extra if k not in present]
                message["headers"] = [*message.get("headers", []), *added]
            await send(message)

        await self.app(scope, receive, with_headers)


def _policy(path: str) -> str:
    if path == "/graphql" or path.startswith(GRAPHIQL_FILES):
        return GRAPHIQL_CSP
    return API_DOCS_CSP if path in API_DOCS else PAGES_CSP


class BodyLimit:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        allowed, named, what = route_limit(self.settings, scope["path"])
        declared = _declared_length(scope)
        seen, cut = 0, False

        async def counted() -> Message:
            nonlocal seen, cut
            if declared is not None and declared > allowed:
                cut = True
                raise BodyTooLarge(named, what)
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > allowed:
                    cut = True
                    raise BodyTooLarge(named, what)
            return message

        async def closing(message: Message) -> None:
            # A body cut off is unread on the socket: `Connection: close` makes the server drop
            # the connection after the answer instead of reading (and discarding) the rest.
            if cut and message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        await self.app(scope, counted, closing)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() and len(value) < 20 else None
    return None


class Overload:
    """Pure ASGI (no BaseHTTPMiddleware: it would cost a task and a queue per request)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.max_in_flight = settings.web_max_in_flight
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._stamp_arrival(scope)
        path = scope.get("path", "")
        if exempt(path):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            metrics.overloaded("graphql" if path == "/graphql" else "page")
            await refuse(scope, send)
            return
        # No await between the check and the increment: one event loop, so no race.
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    @staticmethod
    def _stamp_arrival(scope: Scope) -> None:
        state = scope.setdefault("state", {})
        if "arrived_at" in state:
            return
        rt = getattr(getattr(scope.get("app"), "state", None), "runtime", None)
        if rt is not None:  # None only before the lifespan opened the runtime
            state["arrived_at"] = rt.clock()
