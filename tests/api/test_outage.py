"""A database outage (issue 12, point 7): with a private PostgreSQL stopped under a running app,
pages answer a styled 503 page, plain routes a JSON 503, both with Retry-After and without a
word of the driver's text; once PostgreSQL is back, so is the app."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from desk.core.settings import load_settings
from desk.people import users
from taskdesk import migrate
from taskdesk.embedded import PostgresServer
from tests.factories import make_world
from tests.sessions import signed_in

DRIVER_WORDS = ("psycopg", "sqlalchemy", "OperationalError", "connection", "SELECT", "socket")


@pytest.fixture
def private_pg(tmp_path: Path) -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own, to stop (never the shared one)."""
    pg = PostgresServer(tmp_path / "pg", fast=True)
    pg.start()
    migrate.upgrade(pg.url)
    yield pg
    pg.stop()
    if pg.root != (tmp_path / "pg").resolve() and pg.root.parent == Path("/var/tmp"):
        shutil.rmtree(pg.root, ignore_errors=True)  # moved there when run as root


def assert_no_driver_text(text: str) -> None:
    for word in DRIVER_WORDS:
        assert word.lower() not in text.lower(), (word, text)


async def test_database_down_answers_503_with_retry_after(private_pg, servers, clock) -> None:
    settings = load_settings(
        taskdesk_env="prod",
        database_url=private_pg.url,
        redis_url=servers.redis_url,
        queue_prefix=f"t{uuid.uuid4().hex[:10]}",
        secret_key="outage-test-secret-0123456789",
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        rt.clock = clock
        world = await make_world(rt)
        cookie, _ = signed_in(settings, world.staff)
        _, token = await users.create_token(rt, world.staff, "outage")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="https://test") as c:
            c.cookies.set("taskdesk_session", cookie)
            page = {"Accept": "text/html"}
            assert (await c.get("/tickets", headers=page)).status_code == 200
            anonymous = httpx.AsyncClient(transport=transport, base_url="https://test")
            form = (await anonymous.get("/login")).text
            login_token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)

            private_pg.stop()

            r = await c.get("/tickets", headers=page)
            assert r.status_code == 503 and r.headers["content-type"].startswith("text/html")
            assert int(r.headers["Retry-After"]) >= 1
            assert "cannot reach its database" in r.text and "<main" in r.text  # the styled page
            assert_no_driver_text(r.text)

            r = await c.get("/tasks", headers={"HX-Request": "true"})
            assert r.status_code == 503 and "Retry-After" in r.headers
            assert_no_driver_text(r.text)

            r = await c.get("/tasks/1/download", headers={"Authorization": f"Bearer {token}"})
            assert r.status_code == 503 and "Retry-After" in r.headers
            assert r.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
            assert_no_driver_text(r.text)

            r = await anonymous.post(
                "/login",
                data={"csrf_token": login_token, "email": "chen@acme.test", "password": "x"},
            )
            assert r.status_code == 503 and "Retry-After" in r.headers
            assert_no_driver_text(r.text)
            await anonymous.aclose()

            private_pg.start()
            assert (await c.get("/tickets", headers=page)).status_code == 200
