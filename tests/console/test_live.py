"""The console's live blocks follow the change feed over server-sent events (ui/console/live.py):
a stream says `changed` when its scope's work changes — never for another team's — at most
once a second, and ends with the person's session or access. Outsiders get the unknown
address's 404. Streams are read from the test's app served by a real uvicorn on this event loop
(httpx's ASGI transport would wait for a stream's end)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import psycopg
import pytest
import sqlalchemy as sa
import uvicorn

from desk.core.runtime import Runtime
from desk.people import sessions
from desk.work import tasks
from tests.console.conftest import HTML
from tests.helpers import wait_for
from tests.sessions import signed_in
from ui.console.live import Stream
from web.auth import SESSION_COOKIE

DEADLINE = 30.0
DEBOUNCE = 1.0  # s: a stream pushes at most once a second
EVENTS = {"Accept": "text/event-stream"}


@pytest.fixture
async def served(app) -> AsyncIterator[str]:
    """The `app` fixture's app (lifespan run, change feed listening) on a free port."""
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


@dataclass
class Reader:
    """One stream's items as they arrive: event names, "beat" for a comment, "end" at its end;
    each with the loop time it arrived."""

    response: httpx.Response
    items: asyncio.Queue[tuple[str, float]] = field(default_factory=asyncio.Queue)
    seen: list[tuple[str, float]] = field(default_factory=list)

    async def read(self) -> None:
        clock, name, end = asyncio.get_running_loop().time, "", "broken"
        try:
            async for line in self.response.aiter_lines():
                if line.startswith(":"):
                    await self.items.put(("beat", clock()))
                elif line.startswith("event:"):
                    name = line.removeprefix("event:").strip()
                elif not line and name:
                    await self.items.put((name, clock()))
                    name = ""
            end = "end"  # the server ended it (not a timeout, not a broken connection)
        finally:
            await self.items.put((end, clock()))

    async def next(self) -> tuple[str, float]:
        item = await asyncio.wait_for(self.items.get(), DEADLINE)
        self.seen.append(item)
        return item

    async def event(self) -> str:
        """The next item that is not a heartbeat."""
        while (item := (await self.next())[0]) == "beat":
            pass
        return item

    async def beats_after(self, at: float, count: int) -> list[str]:
        """Every item up to the `count`-th heartbeat that arrived after `at`."""
        got: list[str] = []
        while count:
            name, when = await self.next()
            got.append(name)
            assert name != "end", got
            if name == "beat" and when > at:
                count -= 1
        return got


@dataclass
class Client:
    http: httpx.AsyncClient
    csrf: str


@asynccontextmanager
async def client(base: str, settings, user_id: int) -> AsyncIterator[Client]:
    cookie, csrf = signed_in(settings, user_id)
    # No read timeout: a quiet stream is not an ended one (the reads have their own deadline).
    timeout = httpx.Timeout(DEADLINE, read=None)
    async with httpx.AsyncClient(
        base_url=base, cookies={SESSION_COOKIE: cookie}, timeout=timeout
    ) as http:
        yield Client(http, csrf)


@asynccontextmanager
async def stream(c: Client, path: str = "/ops/live") -> AsyncIterator[Reader]:
    async with c.http.stream("GET", path, headers=EVENTS) as response:
        assert response.status_code == 200
        reader = Reader(response)
        reading = asyncio.create_task(reader.read())
        try:
            assert await reader.event() == "ready"
            yield reader
        finally:
            reading.cancel()


async def _noops(rt: Runtime, team: int, owner: int, n: int, tag: str) -> None:
    """`n` finished NOOP tasks in one statement (one commit)."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO background_task (kind, team_id, owner_id, scope_key, status) "
                "SELECT 'NOOP', :t, :u, :tag || g, 'COMPLETED' FROM generate_series(1, :n) g"
            ),
            {"t": team, "u": owner, "n": n, "tag": tag},
        )


async def test_an_operators_stream_says_changed_when_any_teams_task_changes(
    served, settings, rt, world, operator
) -> None:
    async with client(served, settings, operator) as c, stream(c) as s:
        headers = s.response.headers
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["cache-control"] == "no-store"
        assert headers["x-accel-buffering"] == "no"
        task = await tasks.create_export(rt, world.outsider, world.other_team, {})
        assert await s.event() == "changed"
        await tasks.cancel_task(rt, world.outsider, task.id or 0)
        assert await s.event() == "changed"


async def test_a_lost_listener_resyncs_every_stream(
    served, settings, app, rt, world, operator
) -> None:
    feed = app.state.runtime.feed
    async with client(served, settings, operator) as c, stream(c) as s:
        async with await psycopg.AsyncConnection.connect(
            rt.settings.libpq_url, autocommit=True
        ) as admin:
            await admin.execute("SELECT pg_terminate_backend(%s)", (feed.backend_pid,))
        assert await s.event() == "changed"  # re-read: notices may have been missed


async def test_a_team_admins_stream_follows_their_team_and_no_other(
    served, settings, rt, world, operator, monkeypatch
) -> None:
    monkeypatch.setattr(Stream, "HEARTBEAT", 0.2)
    clock = asyncio.get_running_loop().time
    async with (
        client(served, settings, world.admin) as a,
        client(served, settings, operator) as o,
        stream(a) as admin,
        stream(o) as witness,
    ):
        await tasks.create_export(rt, world.outsider, world.other_team, {})
        assert await witness.event() == "changed"  # the notice has reached every stream
        seen = await admin.beats_after(clock(), 3)
        assert "changed" not in seen and "changed" not in [n for n, _ in admin.seen], seen
        await tasks.create_export(rt, world.staff, world.team, {})
        assert await admin.event() == "changed"


async def test_a_burst_of_a_thousand_changes_is_pushed_a_few_times(
    served, settings, rt, world, operator, monkeypatch
) -> None:
    monkeypatch.setattr(Stream, "HEARTBEAT", 0.3)
    clock = asyncio.get_running_loop().time
    async with client(served, settings, operator) as c, stream(c) as s:
        began = clock()
        for i in range(50):  # 50 commits of 20 tasks each, as fast as they go
            await _noops(rt, world.team, world.staff, 20, f"burst{i}-")
        ended = clock()
        # Past the last push that could still come (a second after the last notice).
        await s.beats_after(ended + DEBOUNCE, 3)
        pushes = [n for n, _ in s.seen].count("changed")
        assert 1 <= pushes <= 2 + (ended - began) / DEBOUNCE, (pushes, ended - began)


@pytest.mark.parametrize("how", ["logout", "revoked", "no longer admin"])
async def test_the_stream_ends_with_the_session_or_the_access(
    served, settings, rt, world, operator, how, monkeypatch
) -> None:
    monkeypatch.setattr(Stream, "HEARTBEAT", 3600.0)  # ended by the feed's notice, not a beat
    user = operator if how == "logout" else world.admin
    async with client(served, settings, user) as c, stream(c) as s:
        if how == "logout":
            r = await c.http.post("/logout", data={"csrf_token": c.csrf})
            assert r.status_code in (303, 302)
        elif how == "revoked":
            assert await sessions.revoke_all(rt, user) == 1
        else:
            async with rt.engine.begin() as conn:
                await conn.execute(
                    sa.text("UPDATE membership SET role = 'STAFF' WHERE user_id = :u"), {"u": user}
                )
        assert await s.event() == "end"
        again = await c.http.get("/ops/live", headers=EVENTS)
        assert again.status_code == 404


async def test_without_a_feed_a_stream_beats_and_still_ends_with_the_session(
    served, settings, app, rt, world, operator, monkeypatch
) -> None:
    monkeypatch.setattr(Stream, "HEARTBEAT", 0.2)
    runtime = app.state.runtime
    feed, runtime.feed = runtime.feed, None
    try:
        async with client(served, settings, operator) as c, stream(c) as s:
            assert (await s.next())[0] == "beat"
            assert await sessions.revoke_all(rt, operator) == 1
            assert await s.event() == "end"  # noticed at a heartbeat
    finally:
        runtime.feed = feed


async def test_a_stream_lets_go_of_the_feed_when_its_reader_goes(
    served, settings, app, world, operator
) -> None:
    feed = app.state.runtime.feed
    before = len(feed.subscriptions)
    async with client(served, settings, operator) as c, stream(c):
        assert len(feed.subscriptions) == before + 1

    async def released() -> bool:
        return len(feed.subscriptions) == before

    await wait_for(released, timeout=DEADLINE, what="the stream's subscription to end")


async def _unknown(page, headers: dict[str, str]) -> tuple[int, str]:
    r = await page.get("/ops-no-such-page", headers=headers)
    assert r.status_code == 404
    return r.status_code, r.text


@pytest.mark.parametrize("who", ["staff", "customer", "anonymous", "other team's admin"])
async def test_outsiders_get_the_unknown_address(page_as, world, scene, operator, who) -> None:
    user = {"staff": world.staff, "customer": world.customer, "anonymous": None}.get(
        who, world.outsider
    )
    page = await page_as(user)
    urls = [f"/ops/live?task={scene.acme_waiting}"]
    if who != "other team's admin":  # who may open their own scope's stream
        urls += ["/ops/live", f"/ops/live?team={world.team}"]
    for headers in (HTML, EVENTS):
        unknown = await _unknown(page, headers)
        for url in urls:
            r = await page.get(url, headers=headers)
            assert (r.status_code, r.text) == unknown, (url, headers)


async def test_a_missing_task_has_no_stream(page_as, operator) -> None:
    page = await page_as(operator)
    r = await page.get("/ops/live?task=987654", headers=HTML)
    assert (r.status_code, r.text) == await _unknown(page, HTML)


async def test_every_live_block_names_its_stream_and_the_page_loads_ops_js(
    page_as, world, scene, operator
) -> None:
    page = await page_as(operator)
    expected = {
        "/ops": "/ops/live",
        "/ops/failures": "/ops/live",
        "/ops/workers": "/ops/live",
        "/ops/lanes": "/ops/live",
        f"/ops/tasks?team={world.team}&kind=EXPORT": f"/ops/live?team={world.team}&amp;kind=EXPORT",
        f"/ops/tasks/{scene.acme_waiting}": f"/ops/live?task={scene.acme_waiting}",
    }
    for url, live in expected.items():
        whole = await page.get(url, headers=HTML)
        assert f'data-live-stream="{live}"' in whole.text, url
        assert '<script src="/static/ops.js" defer></script>' in whole.text, url
        fragment = await page.hx_get(url)
        assert fragment.text.lstrip().startswith('<div id="live"'), url
        assert f'data-live-stream="{live}"' in fragment.text, url
    finished = await page.get(f"/ops/tasks/{scene.acme_other}", headers=HTML)
    assert "data-live-stream" not in finished.text  # a finished task does not change by itself
    script = await page.get("/static/ops.js")
    assert script.status_code == 200 and "EventSource" in script.text
