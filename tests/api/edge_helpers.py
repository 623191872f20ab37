"""Driving the edge layer (web/edge.py) around a plain ASGI app, without a database, and the
headers every answer ends with, spelled out (what the edge adds, in its order)."""

from __future__ import annotations

import asyncio
from typing import Any

from web.edge import Edge

PAGES_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
GRAPHIQL_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
API_DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly; "
    "font-src 'self' https://fonts.gstatic.com; connect-src 'self'; worker-src 'self' blob:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
COMMON = [
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
]


def edge_tail(rid: str, csp: str = PAGES_CSP) -> list[tuple[str, str]]:
    """What the edge puts after the app's own headers outside production: the security
    headers, then the request id."""
    return [*COMMON, ("content-security-policy", csp), ("x-request-id", rid)]


class Held:
    """An inner app that answers 200 once released; counts what reached it."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reached = asyncio.Event()
        self.seen: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen.append(scope["type"])
        if scope["type"] != "http":
            return
        self.reached.set()
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def scope(
    path: str, headers: list[tuple[bytes, bytes]] | None = None, method: str = "GET"
) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "headers": headers or []}


async def call(edge: Edge, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages the edge sends for one request with an empty body."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await edge(scope, receive, send)
    return sent
