"""Support for the subscription tests: the real app served by a real uvicorn in this process (a
real socket for WebSocket and event-stream clients, and the test's injected clock in its
runtime), and a small graphql-transport-ws client that keeps each operation's messages apart."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from api.app import create_app
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from tests.helpers import PATIENCE, free_port, wait_for

DEADLINE = 30.0 * PATIENCE  # only stops a hang: every wait ends on what it waits for
PROTOCOL = "graphql-transport-ws"


@dataclass
class Served:
    url: str
    app: FastAPI

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/graphql"

    @property
    def rt(self) -> Runtime:
        return self.app.state.runtime  # type: ignore[no-any-return]

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, timeout=DEADLINE)


@asynccontextmanager
async def serve(settings: Settings, clock: Any = None, **overrides: Any) -> AsyncIterator[Served]:
    """The app (with these setting overrides) under uvicorn on a free port, its change feed
    listening; `clock` becomes its runtime's clock."""
    app = create_app(load_settings(**(settings.model_dump() | overrides)))
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:

        async def started() -> bool:
            if task.done():
                task.result()  # raises what stopped it
            return server.started

        await wait_for(started, timeout=30, what="uvicorn to start")
        rt: Runtime = app.state.runtime
        if clock is not None:
            rt.clock = clock
        assert rt.feed is not None and await rt.feed.wait_connected(DEADLINE)
        yield Served(f"http://127.0.0.1:{port}", app)
    finally:
        server.should_exit = True
        await task


async def listening(served: Served, count: int) -> None:
    """Wait until `count` subscriptions listen to the server's change feed: a subscription with
    nothing to send at first (`teamTasks`, `notificationAdded`) gives its client no sign of
    being live, and what commits before it listens is not news to it."""
    feed = served.rt.feed
    assert feed is not None

    async def enough() -> bool:
        return len(feed.subscriptions) >= count

    await wait_for(enough, timeout=30, what=f"{count} subscriptions on the change feed")


class Closed(Exception):
    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"closed {code}: {reason}")
        self.code, self.reason = code, reason


class Socket:
    """One graphql-transport-ws connection; messages are kept per operation id."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.inbox: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
        self.pings = 0
        self._ids = 0

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(message))

    async def read_one(self) -> None:
        """Read one message (a ping is answered and counted, anything else kept)."""
        try:
            raw = await asyncio.wait_for(self.ws.recv(), DEADLINE)
        except ConnectionClosed as exc:
            rcvd = exc.rcvd
            raise Closed(rcvd.code if rcvd else None, rcvd.reason if rcvd else "") from None
        message = json.loads(raw)
        if message["type"] == "ping":
            self.pings += 1
            await self.send({"type": "pong"})
            return
        self.inbox[message.get("id")].append(message)

    async def message(self, op: str | None = None) -> dict[str, Any]:
        """The next message for operation `op` (None: one without an id, as connection_ack)."""
        while not self.inbox[op]:
            await self.read_one()
        return self.inbox[op].pop(0)

    async def closed(self) -> Closed:
        """The close the server sends (after reading whatever comes first)."""
        try:
            while True:
                await self.read_one()
        except Closed as closed:
            return closed

    async def send_init(self, payload: dict[str, Any] | None = None) -> None:
        await self.send({"type": "connection_init", "payload": payload or {}})

    async def init(self, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        await self.send_init(payload)
        return await self.message()

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        self._ids += 1
        op = str(self._ids)
        payload: dict[str, Any] = {"query": query, "variables": variables or {}}
        await self.send({"id": op, "type": "subscribe", "payload": payload})
        return op

    async def next(self, op: str) -> dict[str, Any]:
        """The next `next` payload of `op` (fails on anything else)."""
        message = await self.message(op)
        assert message["type"] == "next", message
        return message["payload"]  # type: ignore[no-any-return]

    async def until_complete(self, op: str) -> list[dict[str, Any]]:
        """Every `next` payload of `op` up to its `complete`."""
        out = []
        while (message := await self.message(op))["type"] == "next":
            out.append(message["payload"])
        assert message["type"] == "complete", message
        return out

    async def error(self, op: str) -> list[dict[str, Any]]:
        """The errors of `op`'s `error` message."""
        message = await self.message(op)
        assert message["type"] == "error", message
        return message["payload"]  # type: ignore[no-any-return]

    async def stop(self, op: str) -> None:
        await self.send({"id": op, "type": "complete"})


@asynccontextmanager
async def socket(
    served: Served,
    *,
    token: str | None = None,
    header_token: str | None = None,
    cookie: str | None = None,
    origin: str | None = None,
    init: bool = True,
) -> AsyncIterator[Socket]:
    """A connection signed in as asked: `token` in connection_init, `header_token` in the
    handshake's Authorization header, `cookie` (a `Cookie` header's value), `origin` sent."""
    headers = {}
    if header_token:
        headers["Authorization"] = f"Bearer {header_token}"
    if cookie:
        headers["Cookie"] = cookie
    async with connect(
        served.ws_url,
        subprotocols=[PROTOCOL],  # type: ignore[list-item]
        additional_headers=headers,
        origin=origin,  # type: ignore[arg-type]
        open_timeout=DEADLINE,
    ) as ws:
        s = Socket(ws)
        if init:
            ack = await s.init({"authorization": f"Bearer {token}"} if token else None)
            assert ack["type"] == "connection_ack", ack
        yield s


async def connected(served: Served, token: str) -> Socket:
    """A connection signed in with `token`, for a test that holds several (close `.ws`)."""
    ws = await connect(served.ws_url, subprotocols=[PROTOCOL], open_timeout=DEADLINE)  # type: ignore[list-item]
    s = Socket(ws)
    ack = await s.init({"authorization": f"Bearer {token}"})
    assert ack["type"] == "connection_ack", ack
    return s


def codes(errors: list[dict[str, Any]]) -> list[str]:
    return [e["extensions"]["code"] for e in errors]
