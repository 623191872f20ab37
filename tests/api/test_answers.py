"""One decision of what a request wants back (web/wants.py) and one error renderer
(web/errors.answer), whoever answers: the in-flight refusal, the app's error handlers, the pages.
Each answer spelled out: status, every header in its order, the body."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.datastructures import Headers

from api.app import create_app
from tests.api.edge_helpers import COMMON
from web import overload, wants

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(
    ("headers", "html", "fragment"),
    [
        ({"accept": BROWSER}, True, False),  # a browser's navigation
        ({"hx-request": "true"}, True, True),  # htmx
        ({"hx-request": "true", "hx-history-restore-request": "true"}, True, False),
        ({"accept": "application/json"}, False, False),
        ({"accept": "*/*"}, False, False),
        ({}, False, False),
        ({"accept": "text/html, application/json"}, False, False),  # takes JSON: gets JSON
        ({"hx-request": "false", "accept": "*/*"}, False, False),
    ],
)
def test_what_a_request_wants(headers: dict[str, str], html: bool, fragment: bool) -> None:
    assert wants.html(Headers(headers)) is html
    assert wants.fragment(Headers(headers)) is fragment


async def _refused(path: str, headers: dict[str, str]) -> tuple[int, list[Any], bytes]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raw = [(k.encode(), v.encode()) for k, v in headers.items()]
    await overload.refuse({"type": "http", "path": path, "headers": raw}, send)
    start, body = sent
    headers_out = [(k.decode(), v.decode()) for k, v in start["headers"]]
    return start["status"], headers_out, body["body"]


@pytest.mark.parametrize(
    ("path", "headers", "media", "body"),
    [
        (
            "/tickets",
            {"accept": BROWSER},
            "text/html; charset=utf-8",
            b'<!doctype html><html><head><meta charset="utf-8"><title>Busy</title></head>'
            b"<body><p>The server is busy right now; try again in a second.</p></body></html>",
        ),
        (
            "/tasks/1",
            {"hx-request": "true", "accept": "text/html"},  # a polled row: the text
            "text/plain; charset=utf-8",
            b"The server is busy right now; try again in a second.",
        ),
        (
            "/tickets",
            {"accept": "application/json"},
            "text/plain; charset=utf-8",
            b"The server is busy right now; try again in a second.",
        ),
        (
            "/graphql",
            {"accept": BROWSER},
            "application/json",
            b'{"errors":[{"message":"The server is busy right now; try again in a second.",'
            b'"extensions":{"code":"OVERLOADED"}}]}',
        ),
    ],
)
async def test_the_in_flight_refusal(
    path: str, headers: dict[str, str], media: str, body: bytes
) -> None:
    status, headers_out, got = await _refused(path, headers)
    assert status == 503 and got == body
    assert headers_out == [
        ("content-type", media),
        ("content-length", str(len(body))),
        ("retry-after", "1"),
        ("cache-control", "no-store"),
        *COMMON,
        ("content-security-policy", "default-src 'none'"),
    ]


@pytest.fixture
async def boom(settings, clock) -> AsyncIterator[httpx.AsyncClient]:
    """The app with a route that fails unexpectedly (a bug: a 500)."""
    app: FastAPI = create_app(settings)

    @app.get("/_boom")
    async def fail() -> None:
        raise RuntimeError("a bug")

    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


async def test_a_500_is_text_for_clients_and_the_styled_page_for_browsers(boom) -> None:
    # Starlette sends a 500 from its outermost layer, outside the edge: no security headers,
    # no X-Request-ID (the page still shows the id).
    r = await boom.get("/_boom", headers={"X-Request-ID": "b-1"})
    assert r.status_code == 500 and r.content == b"Internal Server Error"
    assert [(k.decode(), v.decode()) for k, v in r.headers.raw] == [
        ("content-length", "21"),
        ("content-type", "text/plain; charset=utf-8"),
    ]
    r = await boom.get("/_boom", headers={"X-Request-ID": "b-2", "Accept": BROWSER})
    assert r.status_code == 500 and r.text.startswith("<!doctype html>")
    assert 'data-status="500"' in r.text and "Request b-2" in r.text
    assert [(k.decode(), v.decode()) for k, v in r.headers.raw] == [
        ("content-length", str(len(r.content))),
        ("content-type", "text/html; charset=utf-8"),
        ("vary", "HX-Request"),
        ("cache-control", "no-store"),
    ]
    r = await boom.get("/_boom", headers={"X-Request-ID": "b-3", "HX-Request": "true"})
    assert r.status_code == 500  # htmx: the message block, shown in place
    assert r.text == (
        '<p class="msg error" data-status="500">'
        "The server had a problem. Please try again in a moment.</p>\n"
    )
    assert [(k.decode(), v.decode()) for k, v in r.headers.raw] == [
        ("content-length", str(len(r.content))),
        ("content-type", "text/html; charset=utf-8"),
        ("vary", "HX-Request"),
        ("cache-control", "no-store"),
        ("hx-retarget", "#flash"),
        ("hx-reswap", "innerHTML"),
    ]
