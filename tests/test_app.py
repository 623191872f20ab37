"""The app factory: lifespan opens and closes the Runtime, the home page, and expected
domain errors as 4xx answers (JSON for clients, HTML for browsers) instead of 500s."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from desk.core.errors import NotAllowed, NotFound, QuotaExceeded, TaskConflict, ValidationProblem
from desk.core.settings import ConfigError, Settings


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[FastAPI]:
    app = create_app(settings)

    @app.get("/_boom/{kind}")
    async def boom(kind: str) -> None:
        raise {
            "missing": NotFound("Ticket not found."),
            "forbidden": NotAllowed(),
            "invalid": ValidationProblem("title", "cannot be empty"),
            "conflict": TaskConflict(SimpleNamespace(id=42)),
            "quota": QuotaExceeded(datetime.now(UTC) + timedelta(seconds=90)),
        }[kind]

    # httpx's ASGITransport does not run the lifespan; this does.
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


async def test_lifespan_opens_the_runtime(app: FastAPI, settings: Settings) -> None:
    assert app.state.runtime.settings is settings


async def test_home_answers(client: httpx.AsyncClient) -> None:
    r = await client.get("/", follow_redirects=True)  # the pages may send you to sign in
    assert r.status_code == 200 and "taskdesk" in r.text


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("missing", 404, "NOT_FOUND"),
        ("forbidden", 403, "FORBIDDEN"),
        ("invalid", 422, "VALIDATION"),
        ("conflict", 409, "TASK_CONFLICT"),
        ("quota", 429, "QUOTA_EXCEEDED"),
    ],
)
async def test_domain_errors_are_4xx_json(
    client: httpx.AsyncClient, kind: str, status: int, code: str
) -> None:
    r = await client.get(f"/_boom/{kind}", headers={"accept": "application/json"})
    assert r.status_code == status
    assert r.json()["error"]["code"] == code and r.json()["error"]["message"]


async def test_conflict_carries_the_task_to_follow(client: httpx.AsyncClient) -> None:
    r = await client.get("/_boom/conflict")
    assert r.json()["error"]["task_id"] == 42


async def test_quota_says_when_to_retry(client: httpx.AsyncClient) -> None:
    r = await client.get("/_boom/quota")
    assert 1 <= int(r.headers["retry-after"]) <= 90


async def test_browsers_get_an_html_error_page(client: httpx.AsyncClient) -> None:
    r = await client.get("/_boom/missing", headers={"accept": "text/html,*/*"})
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "Ticket not found." in r.text


def test_factory_refuses_missing_urls(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="DATABASE_URL is not set"):
        create_app(settings.model_copy(update={"database_url": ""}))
