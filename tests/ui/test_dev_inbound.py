"""/dev/send, "send as a customer" (desk/work/dev_inbound.py): a newcomer's round trip on a dev
machine — a customer's mail becomes a ticket, staff answer (the answer is caught in /dev/mail),
the customer's answer threads into the same ticket by its In-Reply-To — with the mailbox's real
MAIL_PARSE run by the worker's own `execute`, and the same routes answering 404 outside DEV."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from api.app import create_app
from desk.core.errors import ValidationProblem
from desk.core.runtime import Runtime
from desk.core.settings import Env, Settings
from desk.work import conversation, dev_inbound, mail_sink, mailbox_admin, mailboxes
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.sessions import signed_in
from ui import i18n
from web.auth import SESSION_COOKIE

HTML = {"Accept": "text/html"}
ZH = i18n.catalog("zh_Hans")


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(update={"taskdesk_env": Env.DEV, "data_dir": str(tmp_path)})


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[mail_sink.Sink]:
    started = mail_sink.start(tmp_path)
    yield started
    started.stop()


async def _q(rt: Runtime, sql: str, **params: Any) -> list[Any]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql), params)).all())


async def _run_waiting(rt: Runtime, kind: str) -> int:
    """Run every WAITING task of `kind` as a worker would; how many ran."""
    found = await _q(
        rt, "SELECT id, run FROM background_task WHERE kind = :k AND status = 'WAITING' "
        "ORDER BY id", k=kind,
    )  # fmt: skip
    for row in found:
        assert await execute(rt, registry(), row.id, row.run) == "done"
    return len(found)


async def _send(page: Any, **form: Any) -> Any:
    data = {"csrf_token": page.csrf, "address": "li.wei@customer.test", "name": "Li Wei", **form}
    r = await page.post("/dev/send", data=data, headers=HTML)
    assert r.status_code == 303, r.text
    return r.headers["location"]


async def test_send_as_a_customer_round_trip(
    rt: Runtime, world: World, page_as: Any, sink: mail_sink.Sink, tmp_path: Path
) -> None:
    rt.settings = rt.settings.model_copy(update={"smtp_url": sink.url})
    page = await page_as(world.admin)
    form = await page.get("/dev/send", headers=HTML)
    assert form.status_code == 200 and 'name="ticket"' in form.text
    where = await _send(
        page, team=world.team, subject="The dev printer is on fire", body="Help, please."
    )
    r = await page.get(where, headers=HTML)
    assert "Waiting for a worker" in r.text and 'data-outcome=""' in r.text
    assert await _run_waiting(rt, "MAIL_PARSE") == 1
    r = await page.get(where, headers=HTML)
    [(ticket_id, title)] = [
        (t.id, t.title) for t in await _q(
            rt, "SELECT t.id, t.title FROM inbound_mail i JOIN ticket t ON t.id = i.ticket_id "
            "WHERE t.team_id = :t", t=world.team,
        )
    ]  # fmt: skip
    assert title == "The dev printer is on fire"
    assert 'data-outcome="ticket"' in r.text and f'href="/tickets/{ticket_id}"' in r.text

    # Staff answer; the customer's copy is caught by the dev sink and listed in /dev/mail.
    await conversation.post_message(rt, world.staff, ticket_id, "Try turning it off.")
    assert await _run_waiting(rt, "EMAIL") >= 1
    [answer] = [c for c in mail_sink.caught(tmp_path) if c.to == "li.wei@customer.test"]
    listed = await page.get("/dev/mail", headers=HTML)
    assert answer.subject in listed.text

    # The customer answers that e-mail: In-Reply-To names its Message-ID, so it threads.
    where = await _send(page, team=world.team, ticket=str(ticket_id), body="It is off now.")
    assert await _run_waiting(rt, "MAIL_PARSE") == 1
    r = await page.get(where, headers=HTML)
    assert 'data-outcome="reply"' in r.text and f'href="/tickets/{ticket_id}"' in r.text
    [raw] = await _q(rt, "SELECT raw FROM inbound_mail ORDER BY id DESC LIMIT 1")
    assert f"In-Reply-To: {answer.message_id}".encode() in bytes(raw.raw)
    assert f"Re: {title}".encode() in bytes(raw.raw)
    texts = await _q(
        rt, "SELECT body FROM ticket_message WHERE ticket_id = :t ORDER BY id", t=ticket_id
    )
    assert [t.body for t in texts][-1].strip() == "It is off now."
    assert len(await _q(rt, "SELECT id FROM ticket WHERE title = :t", t=title)) == 1


async def test_the_dev_mailbox_is_one_per_team_and_never_fetched(rt: Runtime, world: World) -> None:
    d = dev_inbound.draft({"team": str(world.team), "address": "a@b.test", "body": "x"})
    first = await dev_inbound.send(rt, d)
    second = await dev_inbound.send(rt, d)
    assert first.mailbox_id == second.mailbox_id
    [box] = await _q(rt, "SELECT host, enabled FROM mailbox WHERE team_id = :t", t=world.team)
    assert (box.host, box.enabled) == (mailbox_admin.DEV_HOST, False)
    async with rt.engine.begin() as conn:
        assert await mailboxes.ensure_fetches(conn, now=rt.clock()) == []
    fetches = await _q(rt, "SELECT id FROM background_task WHERE kind = 'MAIL_FETCH'")
    assert fetches == []
    ids = await _q(rt, "SELECT uid FROM inbound_mail WHERE mailbox_id = :b", b=first.mailbox_id)
    assert sorted(r.uid for r in ids) == [1, 2]


@pytest.mark.parametrize(
    ("form", "field"),
    [
        ({"team": "", "address": "a@b.test"}, "team"),
        ({"team": "1", "address": "not an address"}, "address"),
        ({"team": "1", "address": "a@b.test", "ticket": "12x"}, "ticket"),
    ],
)
def test_a_bad_value_names_its_field(form: dict[str, str], field: str) -> None:
    with pytest.raises(ValidationProblem) as caught:
        dev_inbound.draft(form)
    assert caught.value.field == field


async def test_a_ticket_of_another_team_is_refused_by_name(
    rt: Runtime, world: World, page_as: Any
) -> None:
    foreign = world.tickets and next(iter(world.tickets.values()))
    page = await page_as(world.admin)
    data = {
        "csrf_token": page.csrf, "team": world.other_team, "address": "a@b.test",
        "ticket": str(foreign or 999_999),
    }  # fmt: skip
    r = await page.post("/dev/send", data=data, headers=HTML)
    assert r.status_code == 400 and 'id="err-ticket"' in r.text
    assert await _q(rt, "SELECT id FROM inbound_mail") == []


@pytest.mark.parametrize("env", [Env.TEST, Env.PROD])
async def test_outside_dev_the_routes_do_not_exist(
    settings: Settings, world: World, env: Env
) -> None:
    other = settings.model_copy(update={"taskdesk_env": env, "secret_key": "x" * 32})
    app = create_app(other)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            cookie, csrf = signed_in(other, world.admin)
            client.cookies.set(SESSION_COOKIE, cookie)
            for r in (
                await client.get("/dev/send", headers=HTML),
                await client.get("/dev/send/1", headers=HTML),
                await client.post("/dev/send", data={"csrf_token": csrf}, headers=HTML),
            ):
                assert r.status_code == 404


async def test_the_guard_answers_404_when_the_env_is_not_dev(
    app: Any, page_as: Any, world: World
) -> None:
    app.state.runtime.settings = app.state.runtime.settings.model_copy(
        update={"taskdesk_env": Env.TEST}
    )
    page = await page_as(world.admin)
    for r in (
        await page.get("/dev/send", headers=HTML),
        await page.get("/dev/send/1", headers=HTML),
        await page.post("/dev/send", data={"csrf_token": page.csrf, "team": "1"}, headers=HTML),
    ):
        assert r.status_code == 404


async def test_the_send_pages_render_fully_in_chinese(
    rt: Runtime, world: World, page_as: Any
) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    ZH.missing.clear()
    page = await page_as(world.admin)
    r = await page.get("/dev/send", headers=HTML)
    assert r.status_code == 200 and "以客户身份发信" in r.text
    where = await _send(page, team=world.team, subject="你好", body="打印机坏了")
    r = await page.get(where, headers=HTML)
    assert "正在等待工作进程读取" in r.text
    assert ZH.missing == set()
