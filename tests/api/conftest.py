"""The app in this process, driven over ASGI by httpx, with the test's clock."""

from collections.abc import AsyncIterator

import httpx
import pytest

from api.app import create_app


@pytest.fixture
async def client(settings, clock, world) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://test"
        ) as c:
            c.rt = app.state.runtime
            yield c
