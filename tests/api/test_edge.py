"""The one edge layer (web/edge.py), answer by answer: the status, every header in its order and
the body of each kind of answer it gives (the polled row's short way, the router's fragments and
error pages, JSON refusals, static files, GraphQL and GraphiQL, the API docs, a body over its
cap) — and each of its jobs on its own: the in-flight bound, the request id, the body cap and its
`Connection: close`, the security headers, the metric and log line by route template, other
scope types passed through."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from starlette.requests import Request

from api.app import create_app
from desk.core.settings import load_settings
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.api.edge_helpers import (
    API_DOCS_CSP,
    GRAPHIQL_CSP,
    Held,
    call,
    edge_tail,
    scope,
)
from tests.sessions import signed_in
from ui import render
from web.auth import SESSION_COOKIE
from web.edge import Edge
from web.overload import RETRY_AFTER_SECONDS

HX = {"HX-Request": "true", "X-Request-ID": "edge-1"}
RID = {"X-Request-ID": "edge-2"}
HTML = "text/html; charset=utf-8"
FRAGMENT = [("content-type", HTML), ("vary", "HX-Request"), ("cache-control", "no-store")]
IN_PLACE = [("hx-retarget", "#flash"), ("hx-reswap", "innerHTML")]  # an error shown in #flash


@pytest.fixture
async def client(settings, clock, world) -> AsyncIterator[httpx.AsyncClient]:
    """The app as served (the edge, its short way), signed in as the staff member."""
    cookie, _ = signed_in(settings, world.staff)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            c.cookies.set(SESSION_COOKIE, cookie)
            yield c


def _static(name: str) -> bytes:
    return (Path(__file__).parents[2] / "ui" / "static" / name).read_bytes()


def _headers(r: httpx.Response) -> list[tuple[str, str]]:
    return [(k.decode(), v.decode()) for k, v in r.headers.raw]


def _sized(r: httpx.Response, *rest: tuple[str, str]) -> list[tuple[str, str]]:
    return [("content-length", str(len(r.content))), *rest]


async def test_the_polled_row_and_the_routers_fragments(client, world, rt) -> None:
    active = await tasks.create_export(rt, world.staff, world.team, {"q": "edge"})
    done = await tasks.create_export(rt, world.staff, world.team, {"q": "edge done"})
    assert await execute(rt, registry(), done.id, done.run) == "done"
    now = int(rt.clock().timestamp())
    for url in (f"/tasks/{active.id}", f"/tasks/{active.id}?since={now - 3}"):
        r = await client.get(url, headers=HX)  # the short way's raw row
        assert r.status_code == 200, url
        assert _headers(r) == [*_sized(r), *FRAGMENT, *edge_tail("edge-1")]
        assert r.text.startswith(f'<li id="task-{active.id}" class="task tone-wait"')
        assert 'data-status="Queued"' in r.text and r.text.rstrip().endswith("</li>")
    r = await client.get(f"/tasks/{done.id}", headers=HX)  # finished: the router's answer
    finished = f'{{"task-finished": {{"id": {done.id}, "kind": "EXPORT", "status": "Completed"}}}}'
    assert r.status_code == 200
    assert _headers(r) == [
        *_sized(r),
        *FRAGMENT,
        ("hx-trigger", finished),
        *edge_tail("edge-1"),
    ]
    assert r.text.startswith(f'<li id="task-{done.id}" class="task tone-ok"')
    r = await client.get("/watch?bell=-1", headers=HX)
    assert r.status_code == 200
    assert _headers(r) == [
        ("x-poll-in", "5.00"),
        ("cache-control", "no-store"),
        ("vary", "HX-Request"),
        *_sized(r, ("content-type", HTML)),
        *edge_tail("edge-1"),
    ]
    # The finished export told its owner "Export #N is ready": one unread notification.
    assert r.text.startswith('<a id="bell" class="bell has-unread" href="/notifications"')


async def test_refusals_of_the_polled_row_are_shown_in_place(client, world, rt) -> None:
    hidden = await tasks.create_export(rt, world.customer, world.team, {"q": "theirs"})
    active = await tasks.create_export(rt, world.staff, world.team, {"q": "edge"})
    missing = b'<p class="msg error" data-status="404">Task not found.</p>\n'
    for url in (f"/tasks/{hidden.id}", "/tasks/99999"):  # hidden and missing: the same bytes
        r = await client.get(url, headers=HX)
        assert r.status_code == 404, url
        assert _headers(r) == [*_sized(r), *FRAGMENT, *IN_PLACE, *edge_tail("edge-1")]
        assert r.content == missing
    r = await client.get(f"/tasks/{active.id}?since=x", headers=HX)
    assert r.status_code == 400
    assert _headers(r) == [*_sized(r), *FRAGMENT, *IN_PLACE, *edge_tail("edge-1")]
    assert r.text == (
        '<p class="msg error" data-status="400">since: Input should be a valid number, '
        "unable to parse string as a number</p>\n"
    )


async def test_unknown_addresses_and_methods_as_json_and_as_pages(client) -> None:
    r = await client.get("/nowhere", headers=RID)
    assert r.status_code == 404
    assert _headers(r) == [*_sized(r, ("content-type", "application/json")), *edge_tail("edge-2")]
    assert r.content == b'{"detail":"Not Found"}'
    r = await client.put("/tickets", headers=RID)
    assert r.status_code == 405
    assert _headers(r) == [
        ("allow", "GET, POST"),  # every method some route takes at the path
        *_sized(r, ("content-type", "application/json")),
        *edge_tail("edge-2"),
    ]
    assert r.content == b'{"detail":"Method Not Allowed"}'
    r = await client.get("/tasks/99999/download", headers=RID)
    assert r.status_code == 404
    assert _headers(r) == [*_sized(r, ("content-type", "application/json")), *edge_tail("edge-2")]
    assert r.content == b'{"error":{"code":"NOT_FOUND","message":"Task not found."}}'
    page = {**RID, "Accept": "text/html"}
    for method, url, status, extra in (
        ("GET", "/nowhere", 404, []),
        ("PUT", "/tickets", 405, [("allow", "GET, POST")]),  # after the page's own headers
        ("GET", "/tasks/99999/download", 404, []),
    ):
        r = await client.request(method, url, headers=page)
        assert r.status_code == status, url
        assert _headers(r) == [*_sized(r), *FRAGMENT, *extra, *edge_tail("edge-2")]
        assert r.text.startswith("<!doctype html>") and f'data-status="{status}"' in r.text
        assert "Request edge-2" in r.text  # the pages' styled error, with the request id


async def test_static_files_graphql_graphiql_and_the_api_docs(client, world) -> None:
    r = await client.get("/static/ui.css", headers=RID)  # exempt from the bound
    css = _static("ui.css")
    assert r.status_code == 200 and r.content == css
    names = [name for name, _ in _headers(r)]
    assert names[:5] == ["content-type", "accept-ranges", "content-length", "last-modified", "etag"]
    assert _headers(r)[:3] == [
        ("content-type", "text/css; charset=utf-8"),
        ("accept-ranges", "bytes"),
        ("content-length", str(len(css))),
    ]
    assert _headers(r)[5:] == edge_tail("edge-2")
    r = await client.get("/graphql", headers={**RID, "Accept": "text/html"})
    assert r.status_code == 200 and r.text.startswith("<!doctype html>")
    assert _headers(r) == [
        ("cache-control", "no-store"),
        *_sized(r, ("content-type", HTML)),
        *edge_tail("edge-2", GRAPHIQL_CSP),  # GraphiQL's own policy
    ]
    r = await client.get("/docs", headers=RID)
    assert r.status_code == 200
    assert _headers(r) == [*_sized(r, ("content-type", HTML)), *edge_tail("edge-2", API_DOCS_CSP)]
    r = await client.post("/graphql", headers=RID, json={"query": "{ me { id } }"})
    assert r.status_code == 200
    assert r.content == f'{{"data":{{"me":{{"id":"{world.staff}"}}}}}}'.encode()
    graphql_json = [("cache-control", "no-store"), *_sized(r, ("content-type", "application/json"))]
    assert _headers(r) == [*graphql_json, *edge_tail("edge-2", GRAPHIQL_CSP)]


async def test_a_bad_request_id_is_replaced_by_a_new_one(client) -> None:
    r = await client.post("/graphql", headers={"X-Request-ID": "bad id!"}, json={})
    assert r.status_code == 400
    assert r.content == (
        b'{"errors":[{"message":"`query` must be a non-empty string.",'
        b'"extensions":{"code":"BAD_REQUEST"}}]}'
    )
    *rest, (name, rid) = _headers(r)
    assert name == "x-request-id" and re.fullmatch(r"[0-9a-f]{12}", rid)
    graphql_json = [("cache-control", "no-store"), *_sized(r, ("content-type", "application/json"))]
    assert rest == [*graphql_json, *edge_tail(rid, GRAPHIQL_CSP)[:-1]]


async def test_a_declared_body_over_the_cap_is_refused_before_it_is_read(client) -> None:
    form = {**RID, "Content-Type": "application/x-www-form-urlencoded"}
    r = await client.post("/login", headers=form, content=b"x" * (17 * 1024))
    assert r.status_code == 413
    assert _headers(r) == [*_sized(r), *FRAGMENT, ("connection", "close"), *edge_tail("edge-2")]
    assert "The sign-in form can be at most 16 KiB." in r.text
    r = await client.post("/login", headers=RID, content=b"x" * (17 * 1024))  # not a form:
    assert r.status_code == 403  # nothing reads the body, so the CSRF check refuses it first
    assert _headers(r) == [*_sized(r), *FRAGMENT, *edge_tail("edge-2")]


async def test_a_chunked_body_over_the_cap_is_cut_with_connection_close(client) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * (8 * 1024)  # 80 KiB of a GraphQL request: its cap is 64 KiB

    headers = {"X-Request-ID": "cut", "Content-Type": "application/json"}
    r = await client.post("/graphql", content=chunks(), headers=headers)
    assert r.status_code == 413
    assert _headers(r) == [
        *_sized(r, ("content-type", "application/json")),
        ("connection", "close"),
        *edge_tail("cut", GRAPHIQL_CSP),
    ]
    assert r.json() == {
        "errors": [
            {
                "message": "A GraphQL request can be at most 64 KiB.",
                "extensions": {"code": "PAYLOAD_TOO_LARGE"},
            }
        ]
    }


def test_the_raw_row_has_the_fragments_bytes_and_headers() -> None:
    html = '<tr data-task-id="1">汉字</tr>\n'
    body, headers = render.fragment_raw(html)
    response = render.fragment(html)
    assert body == response.body and headers == response.raw_headers


async def test_metrics_and_log_line_by_route_template(client, world, rt, caplog) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    labels = {"method": "GET", "route": "/tasks/{task_id}", "status": "200"}
    name = "taskdesk_http_request_duration_seconds_count"
    before = REGISTRY.get_sample_value(name, labels) or 0.0
    with caplog.at_level(logging.INFO, logger="taskdesk.http"):
        for _ in range(2):
            r = await client.get(f"/tasks/{task.id}", headers={"HX-Request": "true"})
            assert r.status_code == 200
    assert (REGISTRY.get_sample_value(name, labels) or 0.0) - before == 2
    lines = [r for r in caplog.records if r.name == "taskdesk.http"]
    assert [getattr(r, "route", None) for r in lines] == ["/tasks/{task_id}"] * 2
    assert lines[0].getMessage().startswith(f"GET /tasks/{task.id} 200 ")
    assert getattr(lines[0], "request_id", None) in (None, r.headers["x-request-id"])


# --- the layer on its own (a plain ASGI app inside it, no database) -------------------------


async def test_the_bound_refuses_at_once_and_exempt_paths_pass() -> None:
    inner = Held()
    edge = Edge(inner, settings=load_settings(web_max_in_flight=1), prod=True)
    first = asyncio.create_task(call(edge, scope("/tickets")))
    await asyncio.wait_for(inner.reached.wait(), 10)
    inner.reached.clear()
    assert edge.in_flight == 1
    refused = await call(edge, scope("/tickets"))
    assert refused[0]["status"] == 503
    assert (b"retry-after", str(RETRY_AFTER_SECONDS).encode()) in refused[0]["headers"]
    assert all(name != b"x-request-id" for name, _ in refused[0]["headers"])  # no other work
    health = asyncio.create_task(call(edge, scope("/health")))
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
        other: dict[str, Any] = {"type": kind}
        assert await call(edge, other) == [] and other == {"type": kind}
    answer = await call(edge, scope("/x", [(b"x-request-id", b"abc")]))
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


async def test_a_client_gone_before_its_body_is_logged_499_not_a_500(caplog) -> None:
    """uvicorn answers a malformed chunk itself (400) and tells the app the client left: the
    app's read of the body raises ClientDisconnect, which is no error of ours."""

    async def reads_the_body(scope: Any, receive: Any, send: Any) -> None:
        await Request(scope, receive).body()
        await send({"type": "http.response.start", "status": 200, "headers": []})

    edge = Edge(reads_the_body, settings=load_settings(), prod=True)
    sent: list[dict[str, Any]] = []

    async def gone() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with caplog.at_level(logging.INFO, logger="taskdesk.http"):
        await edge(scope("/graphql", method="POST"), gone, send)
    assert sent == []
    assert edge.in_flight == 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("POST /graphql 499 "), lines
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
