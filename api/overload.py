"""Overload is refused at once: a bound on the HTTP requests one web process serves at a time.

Beyond WEB_MAX_IN_FLIGHT requests in flight, a new one is answered 503 with `Retry-After` before
any work is done for it: pages and fragments get a short text (htmx rows back off and retry by
themselves), `/graphql` the GraphQL error shape with `extensions.code = "OVERLOADED"`. Without
the bound, a busy process takes every request and serves all of them slowly (issue 11: status
reads p50 29 s); with it, the ones it takes stay fast and the others learn at once to come back.

It is the first thing api/edge.py does: a refusal skips the request log, tracing and the rest of the
stack (under a flood of clients that do not back off, refusals are most of the work; they are
counted in `taskdesk_http_overloaded_total` instead). Requests that must answer under load pass
without counting: `/health` (liveness), `/metrics` and static files. Every request also gets its arrival time (`request.state.arrived_at`, from
the runtime's injected clock): a mutation is judged by when it arrived, not by when the server
got to it (a reminder "in 10 s" stays in the future however long it waited).
"""

from __future__ import annotations

import json

from starlette.types import Scope, Send

from api.headers import COMMON

# schema.errors.OVERLOADED, not imported: api.app must stay cheap to import (no GraphQL).
OVERLOADED = "OVERLOADED"
RETRY_AFTER_SECONDS = 1  # short: the refusal is about this instant, not an outage
MESSAGE = "The server is busy right now; try again in a second."
EXEMPT = ("/health", "/metrics", "/static/")
_GRAPHQL_BODY = json.dumps(
    {"errors": [{"message": MESSAGE, "extensions": {"code": OVERLOADED}}]},
    separators=(",", ":"),
).encode()
_PAGE_BODY = (
    '<!doctype html><html><head><meta charset="utf-8"><title>Busy</title></head>'
    f"<body><p>{MESSAGE}</p></body></html>"
).encode()


def exempt(path: str) -> bool:
    return path in EXEMPT[:2] or path.startswith(EXEMPT[2])


def _wants_page(scope: Scope) -> bool:
    """A browser navigation (HTML, not an htmx fragment request) gets a small HTML page."""
    headers = dict(scope.get("headers", ()))
    return b"hx-request" not in headers and b"text/html" in headers.get(b"accept", b"")


def _refusal(scope: Scope) -> tuple[bytes, bytes]:
    if scope.get("path") == "/graphql":
        return _GRAPHQL_BODY, b"application/json"
    if _wants_page(scope):
        return _PAGE_BODY, b"text/html; charset=utf-8"
    return MESSAGE.encode(), b"text/plain; charset=utf-8"


async def refuse(scope: Scope, send: Send) -> None:
    body, media = _refusal(scope)
    headers = [
        (b"content-type", media),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
        (b"cache-control", b"no-store"),
        *COMMON,
        (b"content-security-policy", b"default-src 'none'"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
