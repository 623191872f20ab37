"""Request ids (header, error pages) and the web's JSON log lines, read from a real
`taskdesk serve` process started with LOG_FORMAT=json."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from tests.helpers import serving, wait_until
from tests.schema.conftest import session_cookie
from web.auth import SESSION_COOKIE

CREATE = "mutation($t: ID!) { createExport(teamId: $t) { __typename ... on Task { id } } }"


async def test_a_sane_request_id_is_kept_and_anything_else_replaced(api):
    kept = await api.client.get("/health", headers={"X-Request-ID": "lb-7f3a.9:x_y-z"})
    assert kept.headers["x-request-id"] == "lb-7f3a.9:x_y-z"
    for bad in ("has space", "x" * 65, 'quote"s', ""):
        r = await api.client.get("/health", headers={"X-Request-ID": bad})
        assert re.fullmatch(r"[0-9a-f]{12}", r.headers["x-request-id"]), bad
    one, two = (await api.client.get("/health"), await api.client.get("/health"))
    assert one.headers["x-request-id"] != two.headers["x-request-id"]


async def test_graphql_answers_carry_one_request_id_the_callers(api, world):
    r = await api.client.post(
        "/graphql",
        json={"query": "{ me { id } }"},
        headers={"X-Request-ID": "gql-req-1", **api.headers(world.staff)},
    )
    assert r.headers.get_list("x-request-id") == ["gql-req-1"]


async def test_error_pages_show_the_request_id(api, world):
    html = {"Accept": "text/html", "X-Request-ID": "err-page-42"}
    plain = await api.client.get("/tasks/999999/download", headers=html)
    assert plain.status_code == 401 and "err-page-42" in plain.text
    page = await api.client.get(
        "/tickets/999999", headers={**html, **api.headers(world.staff)}, follow_redirects=False
    )
    assert page.status_code == 404, page.text[:300]
    assert 'class="request-id"' in page.text and "err-page-42" in page.text


@pytest.mark.slow
async def test_web_json_lines_carry_request_and_task_ids(
    settings, rt, world, tmp_path, monkeypatch
):
    monkeypatch.setenv("LOG_FORMAT", "json")
    log_path = tmp_path / "web.log"
    cookie = {"Cookie": f"{SESSION_COOKIE}={session_cookie(rt, world.staff)}"}
    with serving(settings, log_path) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            r = await client.post(
                "/graphql",
                json={"query": CREATE, "variables": {"t": world.team}},
                headers={"X-Request-ID": "trace-me-1", **cookie},
            )
        assert r.json()["data"]["createExport"]["__typename"] == "Task", r.text
        task_id = int(r.json()["data"]["createExport"]["id"])

        def logged() -> bool:
            return (
                '"event": "http"' in log_path.read_text() and "trace-me-1" in log_path.read_text()
            )

        wait_until(logged, 20, "the request's log line")
    lines = [ln for ln in log_path.read_text().splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= rec.keys() for rec in records)
    accepted = [r for r in records if r.get("event") == "accepted"]
    assert accepted, lines
    expected = {
        "request_id": "trace-me-1",
        "task_id": task_id,
        "run": 1,
        "kind": "EXPORT",
        "team_id": world.team,
    }
    assert {k: accepted[0].get(k) for k in expected} == expected
    http = [r for r in records if r.get("event") == "http" and r["request_id"] == "trace-me-1"]
    assert http and http[0]["logger"] == "taskdesk.http"
