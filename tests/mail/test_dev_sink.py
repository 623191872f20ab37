"""The dev mail sink (aiosmtpd, as `taskdesk dev` runs it) and the dev-only page /dev/mail."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from desk.core.runtime import Runtime
from desk.core.settings import Env, Settings
from desk.work import mail_sink
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[mail_sink.Sink]:
    started = mail_sink.start(tmp_path)
    yield started
    started.stop()


@asynccontextmanager
async def _client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture
async def dev_web(settings: Settings, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    dev = settings.model_copy(update={"taskdesk_env": Env.DEV, "data_dir": str(tmp_path)})
    async with _client(dev) as client:
        yield client


async def test_caught_mail_is_listed_and_shown_with_clickable_links(
    rt: Runtime, world: World, sink: mail_sink.Sink, dev_web: httpx.AsyncClient, tmp_path: Path
) -> None:
    from desk.work import mail

    rt.settings = rt.settings.model_copy(update={"smtp_url": sink.url})
    async with rt.engine.begin() as conn:
        task_id = await mail.queue_email(
            conn, to="new.agent@acme.test", template="invitation",
            params={"team_name": "Acme <&>", "inviter_name": "Zhou", "role": "STAFF",
                    "link": "/invitations/abc", "expires_at": "2026-12-10T08:00:00+00:00"},
            locale="en", timezone="UTC", team_id=world.team, user_id=None, now=rt.clock(),
        )  # fmt: skip
    assert await execute(rt, registry(), task_id, 1) == "done"
    [one] = mail_sink.caught(tmp_path)
    assert one.to == "new.agent@acme.test" and one.number == 1
    r = await dev_web.get("/dev/mail")
    assert r.status_code == 200 and 'href="/dev/mail/1"' in r.text
    assert "Zhou invited you to Acme &lt;&amp;&gt; on taskdesk" in r.text
    r = await dev_web.get("/dev/mail/1")
    assert r.status_code == 200
    assert '<a href="http://127.0.0.1:8000/invitations/abc" rel="noreferrer">' in r.text
    assert f"taskdesk-task-{task_id}@127.0.0.1" in r.text
    r = await dev_web.get("/dev/mail/1/html")
    assert r.status_code == 200 and "Acme &lt;&amp;&gt;" in r.text
    assert "script-src 'self'" in r.headers["content-security-policy"]  # no script runs
    for missing in ("/dev/mail/2", "/dev/mail/0", "/dev/mail/x", "/dev/mail/2/html"):
        assert (await dev_web.get(missing)).status_code in (404, 422), missing


@pytest.mark.parametrize("env", [Env.TEST, Env.PROD])
async def test_the_page_is_missing_outside_dev(
    settings: Settings, tmp_path: Path, env: Env
) -> None:
    (tmp_path / "mail").mkdir()
    (tmp_path / "mail" / "000001.eml").write_bytes(b"Subject: secret link\r\n\r\nhi\r\n")
    other = settings.model_copy(
        update={"taskdesk_env": env, "data_dir": str(tmp_path), "secret_key": "x" * 32}
    )
    async with _client(other) as client:
        for url in ("/dev/mail", "/dev/mail/1", "/dev/mail/1/html"):
            r = await client.get(url)
            assert r.status_code == 404 and "secret link" not in r.text, url
        unknown = await client.get("/no/such/page")
        assert r.text == unknown.text.replace("/no/such/page", "/dev/mail/1/html")


def test_a_command_started_beside_dev_finds_its_sink(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from taskdesk.config import resolve_settings

    for name in ("DATABASE_URL", "REDIS_URL"):
        monkeypatch.setenv(name, getattr(settings, name.lower()))
    monkeypatch.delenv("SMTP_URL", raising=False)
    started = mail_sink.start(tmp_path)
    try:
        assert mail_sink.running_url(tmp_path) == started.url
        assert resolve_settings(str(tmp_path)).smtp_url == started.url
    finally:
        started.stop()
    assert mail_sink.running_url(tmp_path) is None
    assert resolve_settings(str(tmp_path)).smtp_url == ""
