"""Request bodies are capped while they are read, chunked or not (issue 12, points 1 and 10):
each route class at its own limit, a 413 that names the limit, pages answered with a page or
form message — and the server stops pulling the body at the limit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from api.app import create_app
from desk.core.settings import load_settings
from desk.people import users
from tests.api.tokens import bearer
from tests.sessions import signed_in

CHUNK = 64 * 1024
HUGE = 200 * 1024 * 1024  # what the client would send if the server kept reading


class Body:
    """A chunked request body (no Content-Length) that counts what the server pulled."""

    def __init__(self, head: bytes = b"", total: int = HUGE, tail: bytes = b"") -> None:
        self.head, self.total, self.tail = head, total, tail
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        self.pulled += len(self.head)
        while self.pulled < self.total:
            yield b"x" * CHUNK
            self.pulled += CHUNK
        yield self.tail


@asynccontextmanager
async def _served(
    settings: Any, clock: Any, import_max_bytes: int, **more: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The app with this import limit (the form limit stays 1 MiB), driven over ASGI."""
    app = create_app(
        load_settings(**(settings.model_dump() | {"import_max_bytes": import_max_bytes} | more))
    )
    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            c.rt = app.state.runtime  # type: ignore[attr-defined]
            yield c


@pytest.fixture
async def app_client(settings, clock, world) -> AsyncIterator[httpx.AsyncClient]:
    async with _served(settings, clock, 1024 * 1024) as c:
        yield c


async def test_chunked_graphql_body_stops_at_64_kib(app_client) -> None:
    body = Body(b'{"query": "{ me { id } }", "pad": "')
    r = await app_client.post(
        "/graphql", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    (error,) = r.json()["errors"]  # GraphQL's own error shape
    assert error["extensions"]["code"] == "PAYLOAD_TOO_LARGE"
    assert error["message"] == "A GraphQL request can be at most 64 KiB."
    assert body.pulled <= 64 * 1024 + 2 * CHUNK  # not the 200 MB on offer


async def test_a_graphql_body_over_64_kib_reads_the_same_declared_or_not(app_client) -> None:
    # One message from one place (web.limits): a declared Content-Length over the cap is refused
    # before a byte is read, in the same words as a chunked body cut at the cap.
    r = await app_client.post(
        "/graphql", content=b"x" * (64 * 1024 + 1), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 413 and r.headers["connection"] == "close"
    assert r.json()["errors"] == [
        {
            "message": "A GraphQL request can be at most 64 KiB.",
            "extensions": {"code": "PAYLOAD_TOO_LARGE"},
        }
    ]


async def test_chunked_multipart_sign_in_is_not_spooled(app_client) -> None:
    boundary = "b0undary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="password"; filename="p"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    body = Body(head, tail=f"\r\n--{boundary}--\r\n".encode())
    r = await app_client.post(
        "/login",
        content=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert r.status_code == 413
    assert r.headers["content-type"].startswith("text/html")  # a page, not JSON
    assert "at most 16 KiB" in r.text
    assert body.pulled <= 16 * 1024 + 2 * CHUNK


def _multipart_file(boundary: str) -> tuple[bytes, bytes]:
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="t.csv"\r\n'
        "Content-Type: text/csv\r\n\r\nexternal_id,title\r\n"
    ).encode()
    return head, f"\r\n--{boundary}--\r\n".encode()


async def test_chunked_upload_stops_at_the_import_limit_and_names_it(app_client, world) -> None:
    _, token = await users.create_token(app_client.rt, world.admin, "t")
    head, tail = _multipart_file("b1")
    body = Body(head, tail=tail)
    r = await app_client.post(
        f"/teams/{world.team}/imports/uploads",
        content=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "multipart/form-data; boundary=b1",
        },
    )
    assert r.status_code == 413, r.text
    assert r.json()["error"]["message"] == "An import file can be at most 1 MiB."
    assert body.pulled <= 1024 * 1024 + 64 * 1024 + 2 * CHUNK


async def test_import_page_upload_answers_its_form_message(app_client, world) -> None:

    cookie, csrf = signed_in(app_client.rt.settings, world.admin)
    head, tail = _multipart_file("b2")
    body = Body(head, tail=tail)
    r = await app_client.post(
        f"/imports?team_id={world.team}",
        content=body,
        headers={
            "Cookie": f"taskdesk_session={cookie}",
            "HX-Request": "true",
            "X-CSRF-Token": csrf,
            "Content-Type": "multipart/form-data; boundary=b2",
        },
    )
    assert r.status_code == 413
    assert 'data-status="413"' in r.text and "1 MiB" in r.text
    assert body.pulled <= 1024 * 1024 + 64 * 1024 + 2 * CHUNK


async def test_page_form_field_over_the_form_limit_is_a_form_message(app_client, world) -> None:
    cookie, csrf = signed_in(app_client.rt.settings, world.staff)
    headers = {"Cookie": f"taskdesk_session={cookie}", "HX-Request": "true", "X-CSRF-Token": csrf}
    data = {"title": "big", "body": "x" * (1024 * 1024 + 10)}
    edit = f"/tickets/{world.tickets['login']}"
    r = await app_client.post(edit, data=data, headers=headers)
    assert r.status_code == 413
    assert r.headers["content-type"].startswith("text/html")
    assert "A form can be at most 1 MiB." in r.text
    # The same with a declared length: refused before the first byte is read.
    r = await app_client.post(
        edit,
        content=b"title=x",
        headers={**headers, "Content-Length": str(5 * 1024 * 1024),
                 "Content-Type": "application/x-www-form-urlencoded"},
    )  # fmt: skip
    assert r.status_code == 413 and "at most 1 MiB" in r.text


async def test_message_routes_get_the_message_limit_and_name_it(settings, clock, world) -> None:
    """A new ticket, a reply and the upload API carry files: their cap is MESSAGE_MAX_BYTES
    (here 2 MiB, above the 1 MiB form limit), and the answer says what was too big."""
    async with _served(settings, clock, 1024 * 1024, message_max_bytes=2 * 1024 * 1024) as c:
        cookie, csrf = signed_in(c.rt.settings, world.staff)
        page = {"Cookie": f"taskdesk_session={cookie}", "HX-Request": "true", "X-CSRF-Token": csrf}
        ticket = world.tickets["login"]
        for path in ("/tickets", f"/tickets/{ticket}/messages"):
            over = await c.post(
                path,
                content=b"body=x",
                headers={**page, "Content-Length": str(3 * 1024 * 1024),
                         "Content-Type": "application/x-www-form-urlencoded"},
            )  # fmt: skip
            assert over.status_code == 413, path
            assert "A message with its files can be at most 2 MiB." in over.text
        api = await c.post(
            "/api/v1/uploads",
            content=b"x",
            headers={**await bearer(c, world.staff), "Content-Length": str(3 * 1024 * 1024),
                     "Content-Type": "multipart/form-data; boundary=b"},
        )  # fmt: skip
        assert api.status_code == 413
        assert "A message with its files" in api.text


@pytest.fixture
async def api_client(settings, clock, world) -> AsyncIterator[httpx.AsyncClient]:
    """An import limit (3 MiB) above the form limit (1 MiB): each route must get its own."""
    async with _served(settings, clock, 3 * 1024 * 1024) as c:
        yield c


async def test_the_rest_import_takes_a_file_up_to_the_import_limit(api_client, world) -> None:
    _, token = await users.create_token(api_client.rt, world.admin, "t")
    auth = {"Authorization": f"Bearer {token}"}
    rows = "".join(f"BIG-{i},A ticket with a rather long title number {i}\n" for i in range(40_000))
    csv = ("external_id,title\n" + rows).encode()
    assert 1024 * 1024 < len(csv) < 3 * 1024 * 1024  # over the form limit, under the import's
    form = {"team_id": str(world.team), "mode": "create"}
    files = {"file": ("big.csv", csv, "text/csv")}
    r = await api_client.post("/api/v1/imports", headers=auth, data=form, files=files)
    assert r.status_code == 202, r.text
    head, tail = _multipart_file("b9")
    body = Body(head, tail=tail)
    r = await api_client.post(
        "/api/v1/imports",
        content=body,
        headers={**auth, "Content-Type": "multipart/form-data; boundary=b9"},
    )
    assert r.status_code == 413, r.text
    assert r.json()["error"]["message"] == "An import file can be at most 3 MiB."
    assert body.pulled <= 3 * 1024 * 1024 + 64 * 1024 + 2 * CHUNK


async def test_a_rest_json_body_over_its_limit_is_a_413_that_names_it(api_client, world) -> None:
    _, token = await users.create_token(api_client.rt, world.staff, "t")
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for extra in ({}, {"Transfer-Encoding": "chunked"}):
        body = Body(b'{"team_id": 1, "q": "', total=3 * 1024 * 1024, tail=b'"}')
        r = await api_client.post("/api/v1/exports", content=body, headers=auth | extra)
        assert r.status_code == 413, r.text
        assert r.json()["error"] == {
            "code": "PAYLOAD_TOO_LARGE",
            "message": "A request body can be at most 1 MiB.",
        }
        assert body.pulled <= 1024 * 1024 + 2 * CHUNK
