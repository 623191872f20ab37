"""The one edge layer (web/edge.py) answers as the four layers it replaced did (tests/api/
legacy_layers.py, with every request going through the router): same status, same headers in
the same order, same body — and each of its jobs on its own: the in-flight bound, the request
id, the body cap and its `Connection: close`, the security headers, the metric and log line by
route template, other scope types passed through."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import REGISTRY
from starlette.middleware import Middleware

from api.app import create_app
from desk.core.settings import load_settings
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.api import legacy_layers as legacy
from tests.sessions import signed_in
from ui import render
from web.auth import SESSION_COOKIE
from web.edge import Edge
from web.overload import RETRY_AFTER_SECONDS


def _legacy(settings: Any) -> FastAPI:
    """The app as it was: the four layers, no short way (every request through the router)."""
    app = create_app(settings)
    prod = False
    app.user_middleware = [
        Middleware(legacy.Overload, settings=settings),
        Middleware(legacy.Observe),
        Middleware(legacy.SecurityHeaders, prod=prod),
        Middleware(legacy.BodyLimit, settings=settings),
    ]
    return app


@pytest.fixture
async def pair(settings, clock, world) -> AsyncIterator[tuple[Any, Any]]:
    """Two clients with the same session cookie: (the edge's app, the legacy layers' app)."""
    cookie, _ = signed_in(settings, world.staff)
    clients = []
    apps = [create_app(settings), _legacy(settings)]
    async with (
        apps[0].router.lifespan_context(apps[0]),
        apps[1].router.lifespan_context(apps[1]),
    ):
        for app in apps:
            app.state.runtime.clock = clock
            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")
            client.cookies.set(SESSION_COOKIE, cookie)
            clients.append(client)
        yield clients[0], clients[1]
        for client in clients:
            await client.aclose()


async def _both(pair: tuple[Any, Any], method: str, url: str, **kw: Any) -> list[Any]:
    out = []
    for client in pair:
        r = await client.request(method, url, **kw)
        out.append((r.status_code, r.headers.raw, r.content))
    return out


async def test_answers_are_the_legacy_layers_answers(pair, world, rt) -> None:
    active = await tasks.create_export(rt, world.staff, world.team, {"q": "edge"})
    done = await tasks.create_export(rt, world.staff, world.team, {"q": "edge done"})
    hidden = await tasks.create_export(rt, world.customer, world.team, {"q": "theirs"})
    assert await execute(rt, registry(), done.id, done.run) == "done"
    hx = {"HX-Request": "true", "X-Request-ID": "edge-1"}
    rid = {"X-Request-ID": "edge-2"}
    now = int(rt.clock().timestamp())
    requests: list[tuple[str, str, dict[str, Any]]] = [
        ("GET", f"/tasks/{active.id}", {"headers": hx}),  # the short way's raw row
        ("GET", f"/tasks/{active.id}?since={now - 3}", {"headers": hx}),
        ("GET", f"/tasks/{done.id}", {"headers": hx}),  # finished: declined, the router's
        ("GET", f"/tasks/{hidden.id}", {"headers": hx}),  # 404
        ("GET", "/tasks/99999", {"headers": hx}),  # the same 404
        ("GET", f"/tasks/{active.id}?since=x", {"headers": hx}),  # 400
        ("GET", "/watch?bell=-1", {"headers": hx}),
        ("GET", "/nowhere", {"headers": rid}),
        ("GET", "/static/ui.css", {"headers": rid}),  # exempt from the bound
        ("GET", "/graphql", {"headers": {**rid, "Accept": "text/html"}}),  # GraphiQL's policy
        ("GET", "/docs", {"headers": rid}),  # the API docs' policy
        ("POST", "/graphql", {"headers": rid, "json": {"query": "{ me { id } }"}}),
        ("POST", "/graphql", {"headers": {**rid, "X-Request-ID": "bad id!"}, "json": {}}),
        ("POST", "/login", {"headers": rid, "content": b"x" * (17 * 1024)}),  # 413 declared
    ]
    for method, url, kw in requests:
        edge, before = await _both(pair, method, url, **kw)
        if kw["headers"].get("X-Request-ID") == "bad id!":  # a new id each: compare the rest
            edge, before = _without_id(edge), _without_id(before)
        assert edge == before, (method, url)


def _without_id(answer: tuple[int, Any, bytes]) -> tuple[int, Any, bytes]:
    status, headers, body = answer
    return status, [(k, v) for k, v in headers if k.lower() != b"x-request-id"], body


async def test_a_chunked_body_over_the_cap_is_cut_with_connection_close(pair) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * (8 * 1024)  # 80 KiB of a GraphQL request: its cap is 64 KiB

    for client in pair:
        headers = {"X-Request-ID": "cut", "Content-Type": "application/json"}
        r = await client.post("/graphql", content=chunks(), headers=headers)
        assert r.status_code == 413 and r.headers["connection"] == "close"
        assert r.headers.raw[-1] == (b"x-request-id", b"cut")


def test_the_raw_row_has_the_fragments_bytes_and_headers() -> None:
    html = '<tr data-task-id="1">汉字</tr>\n'
    body, headers = render.fragment_raw(html)
    response = render.fragment(html)
    assert body == response.body and headers == response.raw_headers


async def test_metrics_and_log_line_by_route_template(pair, world, rt, caplog) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    labels = {"method": "GET", "route": "/tasks/{task_id}", "status": "200"}
    name = "taskdesk_http_request_duration_seconds_count"
    before = REGISTRY.get_sample_value(name, labels) or 0.0
    with caplog.at_level(logging.INFO, logger="taskdesk.http"):
        for _ in range(2):
            r = await pair[0].get(f"/tasks/{task.id}", headers={"HX-Request": "true"})
            assert r.status_code == 200
    assert (REGISTRY.get_sample_value(name, labels) or 0.0) - before == 2
    lines = [r for r in caplog.records if r.name == "taskdesk.http"]
    assert [getattr(r, "route", None) for r in lines] == ["/tasks/{task_id}"] * 2
    assert lines[0].getMessage().startswith(f"GET /tasks/{task.id} 200 ")
    assert getattr(lines[0], "request_id", None) in (None, r.headers["x-request-id"])


# --- the layer on its own (a plain ASGI app inside it, no database) -------------------------


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


def _scope(path: str, headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": path, "headers": headers or []}


async def _call(edge: Edge, scope: dict[str, Any]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await edge(scope, receive, send)
    return sent


async def test_the_bound_refuses_at_once_and_exempt_paths_pass() -> None:
    inner = Held()
    edge = Edge(inner, settings=load_settings(web_max_in_flight=1), prod=True)
    first = asyncio.create_task(_call(edge, _scope("/tickets")))
    await asyncio.wait_for(inner.reached.wait(), 10)
    inner.reached.clear()
    assert edge.in_flight == 1
    refused = await _call(edge, _scope("/tickets"))
    assert refused[0]["status"] == 503
    assert (b"retry-after", str(RETRY_AFTER_SECONDS).encode()) in refused[0]["headers"]
    assert all(name != b"x-request-id" for name, _ in refused[0]["headers"])  # no other work
    health = asyncio.create_task(_call(edge, _scope("/health")))
    await asyncio.wait_for(inner.reached.wait(), 10)  # /health reached the app past the bound
    inner.release.set()
    for answer in await asyncio.gather(first, health):
        assert answer[0]["status"] == 200
    assert edge.in_flight == 0


async def test_other_scopes_pass_untouched_and_headers_are_completed_once() -> None:
    inner = Held()
    inner.release.set()
    edge = Edge(inner, settings=load_settings(), prod=True)
    for kind in ("lifespan", "websocket"):
        scope = {"type": kind}
        assert await _call(edge, scope) == [] and scope == {"type": kind}
    answer = await _call(edge, _scope("/x", [(b"x-request-id", b"abc")]))
    names = [name for name, _ in answer[0]["headers"]]
    assert names == [
        b"x-content-type-options",
        b"x-frame-options",
        b"referrer-policy",
        b"content-security-policy",
        b"strict-transport-security",
        b"x-request-id",
    ]
    assert answer[0]["headers"][-1] == (b"x-request-id", b"abc")
    assert inner.seen == ["lifespan", "websocket", "http"]
