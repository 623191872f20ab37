"""The edge's short way (api.short): the REST task read is answered by its route's handler
before any routing, logged under its route, and every answer — the task, a hidden or missing
one, a bad id, no caller, a database outage — is the one the router gives."""

from __future__ import annotations

import logging
import re
from typing import Any

import psycopg
import pytest

from api import rest, short
from desk.work import tasks
from tests.api.tokens import bearer

VARYING = {"x-request-id", "date"}  # differ between any two answers


def _answer(r: Any) -> tuple[int, bytes, list[tuple[str, str]]]:
    headers = [(k, v) for k, v in r.headers.multi_items() if k not in VARYING]
    return r.status_code, r.content, headers


async def _both_ways(client: Any, monkeypatch: Any, url: str, headers: dict[str, str]) -> tuple:
    """(the short way's answer, the router's answer) to the same request."""
    shortcut = _answer(await client.get(url, headers=headers))
    with monkeypatch.context() as m:
        m.setattr(short, "TASK_READ", re.compile(r"(?!)"))  # matches nothing: the router's way
        routed = _answer(await client.get(url, headers=headers))
    return shortcut, routed


async def test_every_answer_is_the_routers(client, world, monkeypatch) -> None:
    mine = await tasks.create_export(client.rt, world.customer, world.team, {})
    owner = await bearer(client, world.customer)
    other = await bearer(client, world.customer2)
    asked = [
        (f"/api/v1/tasks/{mine.id}", owner, 200),
        (f"/api/v1/tasks/{mine.id}?x=1", owner, 200),
        (f"/api/v1/tasks/{mine.id}", other, 404),  # not theirs: as missing
        ("/api/v1/tasks/999999", owner, 404),
        ("/api/v1/tasks/abc", owner, 404),
        ("/api/v1/tasks/0", owner, 404),
        (f"/api/v1/tasks/{mine.id}", {}, 401),
        (f"/api/v1/tasks/{mine.id}", {"Authorization": "Bearer nonsense"}, 401),
    ]
    for url, headers, status in asked:
        shortcut, routed = await _both_ways(client, monkeypatch, url, headers)
        assert shortcut[0] == status, (url, shortcut)
        assert shortcut == routed, url


async def test_a_database_outage_is_the_routers_503(client, world, monkeypatch) -> None:
    mine = await tasks.create_export(client.rt, world.customer, world.team, {})
    owner = await bearer(client, world.customer)

    async def down(*args: Any, **kw: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(rest, "identify", down)  # the caller and the task: one statement
    shortcut, routed = await _both_ways(client, monkeypatch, f"/api/v1/tasks/{mine.id}", owner)
    assert shortcut[0] == 503 and b"connection refused" not in shortcut[1]
    assert shortcut == routed


async def test_the_read_is_the_short_ways_and_logged_under_its_route(
    client, world, caplog, monkeypatch
) -> None:
    mine = await tasks.create_export(client.rt, world.customer, world.team, {})
    owner = await bearer(client, world.customer)
    taken: list[str] = []
    answer = short.Short.__call__

    async def spy(self: Any, scope: Any, receive: Any) -> Any:
        got = await answer(self, scope, receive)
        if got is not None:
            taken.append(f"{scope['method']} {scope['path']}")
        return got

    monkeypatch.setattr(short.Short, "__call__", spy)
    with caplog.at_level(logging.INFO, logger="taskdesk.http"):
        assert (await client.get(f"/api/v1/tasks/{mine.id}", headers=owner)).status_code == 200
        assert (await client.get("/api/v1/tasks/999999", headers=owner)).status_code == 404
        listed = await client.get(f"/api/v1/tasks?team_id={world.team}", headers=owner)
        assert listed.status_code == 200
        assert (await client.head(f"/api/v1/tasks/{mine.id}", headers=owner)).status_code == 405
    assert taken == [f"GET /api/v1/tasks/{mine.id}", "GET /api/v1/tasks/999999"]
    routes = [getattr(r, "route", None) for r in caplog.records if r.name == "taskdesk.http"]
    read = "/api/v1/tasks/{task_id}"
    assert routes == [read, read, "/api/v1/tasks", read]


@pytest.mark.parametrize(
    "path", ["/api/v1/tasks/1/", "/api/v1/tasks/1/cancel", "/api/v1/tasks", "/api/v1/tasks/"]
)
async def test_other_paths_go_the_routers_way(path: str) -> None:
    scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    assert await short.Short()(scope, receive) is None
