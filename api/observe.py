"""The outermost middleware: a request id for every HTTP request, and its duration as a metric.

The id is the caller's `X-Request-ID` when it is sane (1 to 64 of `A-Z a-z 0-9 . _ : -`), else a
new one; it is bound for logging (every line of the request carries it), kept on
`request.state.request_id` (error pages show it) and returned in the `X-Request-ID` header.
The duration is recorded by route template (`/tasks/{task_id}/download`), never by raw path, so
the metric's labels stay few; a path that matched no route counts as `<unmatched>`.
"""

from __future__ import annotations

import logging
import re
import secrets
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from desk import logs, telemetry, tracing

log = logging.getLogger("taskdesk.http")
SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
UNMATCHED = "<unmatched>"


def request_id_from(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            text = value.decode("latin-1")
            if SANE_ID.fullmatch(text):
                return str(text)
            break
    return secrets.token_hex(6)  # 12 hex digits, as GraphQL's answers always had


def route_template(scope: Scope) -> str:
    """The path pattern of the route that matched (a mount's prefix for static files)."""
    route = scope.get("route")
    path = getattr(route, "path", None) or getattr(route, "path_format", None)
    if not path:
        return UNMATCHED
    return str(path)


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
            telemetry.http_request(method, route, status, seconds)
            log.info(
                "%s %s %s %.1f ms",
                method,
                scope.get("path", ""),
                status,
                seconds * 1000,
                extra={"event": "http", "route": route},
            )
            logs.reset(token)
