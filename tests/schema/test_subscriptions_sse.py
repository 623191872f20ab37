"""Subscriptions as server-sent events (graphql-sse, distinct connections mode) at /graphql, read
with httpx's streaming against a real uvicorn: a task followed to its end over POST and GET,
refusals as HTTP answers in the GraphQL error shape (401, 403, 400, 415, 429), the `: ping`
heartbeat, and a stream that does not keep a slot of the in-flight bound (web/edge.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import users
from desk.work import tasks
from schema import streams
from tests.factories import World
from tests.schema.subscribing import Served, codes, listening, serve
from tests.sessions import cookie_header

TASK = "subscription($id: ID!) { taskUpdated(id: $id) { id status } }"
NOTES = "subscription { notificationAdded { id } }"
SSE = {"Accept": "text/event-stream"}


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Events:
    """The events of one stream, as (event, data) pairs; comments as ("comment", text)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()

    async def next(self) -> tuple[str, Any]:
        event, data = "", None
        async for line in self.lines:
            if line.startswith(":"):
                return "comment", line[1:].strip()
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                text = line[5:].strip()
                data = json.loads(text) if text else None
            elif line == "" and event:
                return event, data
        raise AssertionError("the stream ended")

    async def event(self) -> tuple[str, Any]:
        """The next event, past heartbeats."""
        while (got := await self.next())[0] == "comment":
            pass
        return got


@asynccontextmanager
async def stream(
    served: Served,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    headers: dict[str, str],
    method: str = "POST",
) -> AsyncIterator[Events]:
    async with served.client() as client:
        if method == "GET":
            params = {"query": query, "variables": json.dumps(variables or {})}
            request = client.stream("GET", "/graphql", params=params, headers={**SSE, **headers})
        else:
            body = {"query": query, "variables": variables or {}}
            request = client.stream("POST", "/graphql", json=body, headers={**SSE, **headers})
        async with request as response:
            assert response.status_code == 200, await response.aread()
            assert response.headers["content-type"].startswith("text/event-stream")
            assert response.headers["x-request-id"]
            yield Events(response)


async def _refusal(served: Served, body: Any, headers: dict[str, str]) -> httpx.Response:
    async with served.client() as client:
        if isinstance(body, bytes):
            return await client.post("/graphql", content=body, headers={**SSE, **headers})
        return await client.post("/graphql", json=body, headers={**SSE, **headers})


async def test_an_event_stream_follows_a_task_to_its_end(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = (await users.create_token(rt, world.staff, "sse"))[1]
    export = await tasks.create_export(rt, world.staff, world.team, {})
    async with serve(settings, clock) as served:
        async with stream(served, TASK, {"id": str(export.id)}, headers=_bearer(token)) as events:
            event, data = await events.event()
            assert (event, data["data"]["taskUpdated"]["status"]) == ("next", "WAITING")
            await tasks.cancel_task(rt, world.staff, export.id or 0)
            event, data = await events.event()
            assert (event, data["data"]["taskUpdated"]["status"]) == ("next", "CANCELLED")
            assert (await events.event())[0] == "complete"
        # GET works the same (EventSource's way), here with the session cookie.
        cookie = {"Cookie": cookie_header(settings, world.customer)}
        async with stream(served, TASK, {"id": "1"}, headers=cookie, method="GET") as events:
            assert await events.event() == ("next", {"data": {"taskUpdated": None}})
            assert (await events.event())[0] == "complete"


async def test_refusals_are_http_answers_in_the_graphql_error_shape(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = (await users.create_token(rt, world.staff, "sse"))[1]
    cookie = cookie_header(settings, world.staff)
    op = {"query": TASK, "variables": {"id": "1"}}
    async with serve(settings, clock) as served:
        cases: list[tuple[Any, dict[str, str], int, str]] = [
            (op, {}, 401, "UNAUTHENTICATED"),
            (op, _bearer("tdk_unknown"), 401, "UNAUTHENTICATED"),
            (op, {"Cookie": cookie, "Origin": "https://evil.example"}, 403, "FORBIDDEN"),
            ({"query": "{ me { id } }"}, _bearer(token), 400, "BAD_REQUEST"),
            ({"query": "subscription {"}, _bearer(token), 400, "GRAPHQL_PARSE_FAILED"),
            ({"query": "subscription { nope }"}, _bearer(token), 400, "GRAPHQL_VALIDATION_FAILED"),
            (
                b"not json",
                {**_bearer(token), "Content-Type": "application/json"},
                400,
                "BAD_REQUEST",
            ),
            (
                b"{}",
                {**_bearer(token), "Content-Type": "text/plain"},
                415,
                "UNSUPPORTED_MEDIA_TYPE",
            ),
        ]
        for body, headers, status, code in cases:
            r = await _refusal(served, body, headers)
            assert (r.status_code, codes(r.json()["errors"])) == (status, [code]), (body, headers)
            assert r.headers["content-type"] == "application/json"
        # Without `Accept: text/event-stream` a subscription is the POST endpoint's to refuse.
        async with served.client() as client:
            r = await client.post("/graphql", json=op, headers=_bearer(token))
        assert r.status_code == 400 and "text/event-stream" in r.json()["errors"][0]["message"]


async def test_over_the_limit_is_429_too_many_subscriptions(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = (await users.create_token(rt, world.staff, "sse"))[1]
    async with (
        serve(settings, clock, subscriptions_per_person=1) as served,
        stream(served, NOTES, headers=_bearer(token)),
    ):
        await listening(served, 1)
        r = await _refusal(served, {"query": NOTES}, _bearer(token))
        assert r.status_code == 429 and codes(r.json()["errors"]) == ["TOO_MANY_SUBSCRIPTIONS"]


async def test_a_quiet_stream_sends_heartbeats(
    settings: Settings,
    rt: Runtime,
    world: World,
    clock: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(streams, "HEARTBEAT_SECONDS", 0.2)  # read when the app is built
    token = (await users.create_token(rt, world.staff, "sse"))[1]
    async with (
        serve(settings, clock) as served,
        stream(served, NOTES, headers=_bearer(token)) as events,
    ):
        assert await events.next() == ("comment", "ping")


async def test_open_streams_hold_no_slot_of_the_in_flight_bound(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """With room for one request in flight, two streams stay open and a query is still served:
    an event stream gives its slot back once it answers (web/edge.py)."""
    token = (await users.create_token(rt, world.staff, "sse"))[1]
    bound = {"web_max_in_flight": 1, "web_min_in_flight": 1}
    async with (
        serve(settings, clock, **bound) as served,
        stream(served, NOTES, headers=_bearer(token)),
        stream(served, NOTES, headers=_bearer(token)),
        served.client() as client,
    ):
        await listening(served, 2)
        r = await client.post("/graphql", json={"query": "{ me { id } }"}, headers=_bearer(token))
        assert r.status_code == 200 and r.json()["data"]["me"]["id"] == str(world.staff)
