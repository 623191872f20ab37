"""One per-user change budget for GraphQL mutations and page form posts (issue 12, point 10),
429 with Retry-After when spent; the page's Export at quota says when to try again too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import sqlalchemy as sa

from api.app import create_app
from desk.core.settings import load_settings
from desk.people import throttle, users
from tests.sessions import signed_in


@pytest.fixture
async def client(settings, clock, world) -> AsyncIterator[httpx.AsyncClient]:
    tight = {"mutation_rate_per_minute": 3, "export_max_active_per_user": 1}
    app = create_app(load_settings(**(settings.model_dump() | tight)))
    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            cookie, csrf = signed_in(app.state.settings, world.staff)
            c.cookies.set("taskdesk_session", cookie)
            c.headers.update({"HX-Request": "true", "X-CSRF-Token": csrf})
            c.rt = app.state.runtime  # type: ignore[attr-defined]
            yield c


async def _tickets(rt, title: str) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT count(*) FROM ticket WHERE title = :t")
        return int((await conn.execute(q, {"t": title})).scalar_one())


async def test_page_posts_and_mutations_share_one_budget(client, clock, world) -> None:
    rt = client.rt
    _, token = await users.create_token(rt, world.staff, "script")
    mutation = {"query": "mutation { markNotificationsRead(all: true) { __typename } }"}
    bearer = {"Authorization": f"Bearer {token}"}
    r = await client.post("/graphql", json=mutation, headers=bearer)
    assert "errors" not in r.json(), r.text
    for _ in range(2):
        r = await client.post("/tickets", data={"title": "budget", "body": "b"})
        assert r.status_code in (200, 204), r.text
    r = await client.post("/tickets", data={"title": "budget", "body": "b"})
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60
    assert "changes a minute" in r.text
    assert await _tickets(rt, "budget") == 2
    r = await client.post("/graphql", json=mutation, headers=bearer)
    assert r.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
    assert 1 <= r.json()["errors"][0]["extensions"]["retryAfter"] <= 60  # as the page's header
    # Signing out is not a change: it works with the budget spent.
    assert (await client.post("/logout")).headers.get("HX-Redirect") == "/login"
    clock.advance(60)
    cookie, csrf = signed_in(rt.settings, world.staff)
    client.cookies.set("taskdesk_session", cookie)
    client.headers["X-CSRF-Token"] = csrf
    r = await client.post("/tickets", data={"title": "budget", "body": "b"})
    assert r.status_code in (200, 204) and await _tickets(rt, "budget") == 3


async def test_export_at_quota_says_when_to_try_again(client) -> None:
    assert (await client.post("/exports", data={"status": "OPEN"})).status_code == 202
    r = await client.post("/exports", data={"status": "PENDING"})
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60


async def test_changes_counted_at_the_same_moment_share_a_round_trip_and_the_budget(
    rt, world
) -> None:
    """Concurrent changes of one process are counted together (desk/core/gather.py): each is
    counted once, so exactly the budget's worth goes through."""
    rt.settings = rt.settings.model_copy(update={"mutation_rate_per_minute": 7})
    outcomes = await asyncio.gather(
        *(throttle.count_change(rt, world.staff) for _ in range(12)), return_exceptions=True
    )
    assert sum(o is None for o in outcomes) == 7
    assert all(isinstance(o, throttle.Throttled) for o in outcomes if o is not None)
    window = int(rt.clock().timestamp() // 60)
    assert int(await rt.redis.get(throttle.mutation_key(rt, world.staff, window))) == 12
