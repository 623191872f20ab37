"""A cap on request bodies: nothing larger than an import file (plus room for the form around
it) is read, parsed or spooled to disk by any route."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

SLACK = 1 << 20  # multipart boundaries and the other form fields


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes + SLACK

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = dict(scope["headers"]).get(b"content-length", b"")
            if length.isdigit() and int(length) > self.max_bytes:
                await _too_large(send, self.max_bytes)
                return
        await self.app(scope, receive, send)


async def _too_large(send: Send, limit: int) -> None:
    message = f"The request is larger than {limit // 2**20} MB."
    body = json.dumps({"error": {"code": "PAYLOAD_TOO_LARGE", "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
