"""Fixtures for the GraphQL tests: the real app (with its lifespan) behind an in-process client,
and `Api`, which posts operations as a given user (session cookie or bearer token)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from tests.sessions import signed_in
from web.auth import SESSION_COOKIE


def session_cookie(rt: Runtime, user_id: int) -> str:
    """The signed cookie the login page would set for `user_id` (a new server-side session)."""
    return signed_in(rt.settings, user_id)[0]


class Api:
    """Posts GraphQL operations to the app and returns the decoded JSON."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient) -> None:
        self.app = app
        self.client = client
        self._cookies: dict[int, str] = {}  # one server-side session per user, made on first use

    @property
    def rt(self) -> Runtime:
        return self.app.state.runtime  # type: ignore[no-any-return]

    def headers(self, user: int | None = None, token: str | None = None) -> dict[str, str]:
        if token is not None:
            return {"Authorization": f"Bearer {token}"}
        if user is not None:
            if user not in self._cookies:
                self._cookies[user] = session_cookie(self.rt, user)
            return {"Cookie": f"{SESSION_COOKIE}={self._cookies[user]}"}
        return {}

    async def post(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        *,
        user: int | None = None,
        token: str | None = None,
    ) -> httpx.Response:
        body: dict[str, Any] = {"query": query}
        if variables is not None:
            body["variables"] = variables
        return await self.client.post("/graphql", json=body, headers=self.headers(user, token))

    async def __call__(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        *,
        user: int | None = None,
        token: str | None = None,
    ) -> dict[str, Any]:
        r = await self.post(query, variables, user=user, token=token)
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]


ApiFactory = Callable[..., AbstractAsyncContextManager[Api]]


@pytest.fixture
def make_api(settings: Settings, clock: Any) -> ApiFactory:
    """`async with make_api(taskdesk_env="prod", ...) as api:` — an app with these settings."""

    @asynccontextmanager
    async def factory(**overrides: Any) -> AsyncIterator[Api]:
        # Validated like the environment would be (an enum, not a string, for TASKDESK_ENV).
        app = create_app(load_settings(**(settings.model_dump() | overrides)))
        async with app.router.lifespan_context(app):
            app.state.runtime.clock = clock  # injected time, shared with the `rt` fixture
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                yield Api(app, client)

    return factory


@pytest.fixture
async def api(make_api: ApiFactory) -> AsyncIterator[Api]:
    async with make_api() as a:
        yield a
