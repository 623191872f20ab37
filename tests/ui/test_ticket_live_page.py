"""A ticket page's live stream (ui/ticket_live.py): `GET /tickets/{id}/live` says `changed` when
the ticket's thread changes, for whoever may see the ticket; anyone else gets the 404 a missing
ticket gets, and a stream ends with the session. Streams are read from the `app` fixture served by
a real uvicorn on this event loop (httpx's ASGI transport waits for a response's end); every read
has a deadline, nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
import uvicorn

from desk.people import sessions
from desk.work import conversation, opening
from tests.helpers import wait_for
from tests.sessions import signed_in
from ui.ticket_live import Stream
from web.auth import SESSION_COOKIE

DEADLINE = 30.0
EVENTS = {"Accept": "text/event-stream"}
MISSING = 2_000_000_000


@pytest.fixture
async def served(app) -> AsyncIterator[str]:
    assert await app.state.runtime.feed.wait_connected(DEADLINE)
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
            timeout_graceful_shutdown=5,
        )
    )  # fmt: skip
    serving = asyncio.create_task(server.serve())

    async def started() -> bool:
        assert not serving.done(), "the server stopped"
        return server.started

    await wait_for(started, timeout=DEADLINE, what="uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    await serving


class Reader:
    """A stream's items as they come: event names, "beat" for a comment, "end" at its end."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.items: asyncio.Queue[str] = asyncio.Queue()

    async def read(self) -> None:
        name, end = "", "broken"
        try:
            async for line in self.response.aiter_lines():
                if line.startswith(":"):
                    await self.items.put("beat")
                elif line.startswith("event:"):
                    name = line.removeprefix("event:").strip()
                elif not line and name:
                    await self.items.put(name)
                    name = ""
            end = "end"
        finally:
            await self.items.put(end)

    async def event(self) -> str:
        """The next item that is not a heartbeat, within the deadline."""
        while (item := await asyncio.wait_for(self.items.get(), DEADLINE)) == "beat":
            pass
        return item


@asynccontextmanager
async def _stream(base: str, settings, user_id: int, ticket: int) -> AsyncIterator[Reader]:
    cookie, _csrf = signed_in(settings, user_id)
    timeout = httpx.Timeout(DEADLINE, read=None)  # a quiet stream is not an ended one
    async with (
        httpx.AsyncClient(base_url=base, cookies={SESSION_COOKIE: cookie}, timeout=timeout) as c,
        c.stream("GET", f"/tickets/{ticket}/live", headers=EVENTS) as response,
    ):
        assert response.status_code == 200
        reader = Reader(response)
        reading = asyncio.create_task(reader.read())
        try:
            assert await reader.event() == "ready"
            yield reader
        finally:
            reading.cancel()


async def _ticket(rt, world) -> int:
    opened = await opening.open_ticket(rt, world.customer, world.team, "Printer", "Error 42")
    assert opened.ticket.id is not None
    return opened.ticket.id


@pytest.mark.parametrize("who", ["outsider", "customer2"])
async def test_who_may_not_see_the_ticket_gets_the_missing_ones_404(
    page_as, world, rt, who
) -> None:
    ticket = await _ticket(rt, world)
    page = await page_as(getattr(world, who))
    for headers in (EVENTS, {"Accept": "text/html"}):
        hidden = await page.get(f"/tickets/{ticket}/live", headers=headers)
        missing = await page.get(f"/tickets/{MISSING}/live", headers=headers)
        assert hidden.status_code == missing.status_code == 404
        assert hidden.text == missing.text and hidden.headers.get("content-type") == (
            missing.headers.get("content-type")
        )


async def test_staffs_stream_says_changed_on_a_reply(served, settings, rt, world) -> None:
    ticket = await _ticket(rt, world)
    async with _stream(served, settings, world.staff, ticket) as s:
        headers = s.response.headers
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["cache-control"] == "no-store"
        await conversation.post_message(rt, world.customer, ticket, "Still broken")
        assert await s.event() == "changed"


async def test_the_customers_stream_follows_their_ticket(served, settings, rt, world) -> None:
    ticket = await _ticket(rt, world)
    async with _stream(served, settings, world.customer, ticket) as s:
        await conversation.post_message(rt, world.staff, ticket, "Try turning it off and on")
        assert await s.event() == "changed"


async def test_the_stream_ends_with_the_session(served, settings, rt, world, monkeypatch) -> None:
    monkeypatch.setattr(Stream, "HEARTBEAT", 3600.0)  # ended by the feed's notice, not a beat
    ticket = await _ticket(rt, world)
    async with _stream(served, settings, world.customer, ticket) as s:
        assert await sessions.revoke_all(rt, world.customer) >= 1
        assert await s.event() == "end"
