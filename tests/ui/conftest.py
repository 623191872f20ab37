"""Fixtures for the page tests: the real app (lifespan run, FakeClock injected) and signed-in
httpx clients, one per user, each knowing its session's CSRF token."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from desk.core.feed import Feed
from desk.core.settings import Settings
from tests.sessions import signed_in
from web.auth import SESSION_COOKIE


class Page(httpx.AsyncClient):
    """A browser-like client: `hx_*` methods send what htmx sends, including the CSRF header."""

    csrf: str = ""
    feed: Feed | None = None

    async def hx_get(self, url: str, **kw: Any) -> httpx.Response:
        if url.startswith("/watch") and self.feed is not None:
            # A tick is answered from the process's memory of the change feed, which hears of a
            # commit a moment after it: a browser's next tick comes seconds later, a test's at
            # once. Wait for the notices of what the test just wrote, as that second would.
            assert await self.feed.sync()
        return await self.get(url, headers={"HX-Request": "true", **kw.pop("headers", {})}, **kw)

    async def hx_post(self, url: str, data: Any = None, **kw: Any) -> httpx.Response:
        headers = {"HX-Request": "true", "X-CSRF-Token": self.csrf, **kw.pop("headers", {})}
        return await self.post(url, data=data, headers=headers, **kw)


@pytest.fixture
async def app(settings: Settings, clock: Any, world: Any) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    # httpx's ASGITransport does not run the lifespan; this does.
    async with application.router.lifespan_context(application):
        application.state.runtime.clock = clock  # the same FakeClock as the `rt` fixture
        yield application


PageFactory = Callable[[int | None], Awaitable[Page]]


@pytest.fixture
async def page_as(app: FastAPI) -> AsyncIterator[PageFactory]:
    """`await page_as(user_id)`: a client signed in as that user (None: anonymous)."""
    opened: list[Page] = []

    async def factory(user_id: int | None) -> Page:
        # One request id for the whole client: error pages show it, and tests compare the
        # answers for a foreign and a missing id byte for byte.
        client = Page(
            transport=httpx.ASGITransport(app=app),
            base_url="http://test",
            headers={"X-Request-ID": "ui-test"},
        )
        opened.append(client)
        client.feed = app.state.runtime.feed
        if user_id is not None:
            cookie, client.csrf = signed_in(app.state.settings, user_id)
            client.cookies.set(SESSION_COOKIE, cookie)
        return client

    yield factory
    for client in opened:
        await client.aclose()
