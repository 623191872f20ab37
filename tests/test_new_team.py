"""A brand-new support team, end to end, through its real faces: an operator creates the team
with `taskdesk teams create` (a real process), its admin accepts the printed link on the page,
invites an agent and a customer from /members; the invitations arrive at a real SMTP server
process and the e-mailed links are the ones that work; the agent asks for "export ready" by
e-mail, exports, and a real worker process runs it, notifies in-app and e-mails a link that
downloads the CSV; the customer sees only a customer's pages; the agent's weekly schedule makes
exactly one export for its occurrence and its next run moves a week on."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from datetime import datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from api.app import create_app
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from jobs import scheduler
from jobs.execution import execute
from jobs.processors import registry
from tests.conftest import FakeClock
from tests.helpers import ROOT, WorkerProcess, settings_env, wait_for, wait_until
from tests.smtp_server import SmtpServer

pytestmark = pytest.mark.slow  # starts the CLI, an SMTP server and a worker as processes

PUBLIC = "https://desk.initech.test"
HTML = {"Accept": "text/html"}
TEAM = "Initech Support"
PEOPLE = {
    "boss@initech.test": ("Bill Lumbergh", "yeah if you could just"),
    "peter@initech.test": ("Peter Gibbons", "tps reports forever"),
    "milton@initech.test": ("Milton Waddams", "my red stapler 42"),
}

Browser = Callable[[], Awaitable[httpx.AsyncClient]]


@pytest.fixture
def smtp(tmp_path: Path) -> Iterator[SmtpServer]:
    server = SmtpServer(tmp_path / "smtp")
    try:
        wait_until(server.ready, 30, "the SMTP server to listen")
        yield server
    finally:
        server.stop()


@pytest.fixture
async def browser(settings: Settings, clock: FakeClock) -> AsyncIterator[Browser]:
    """`await browser()`: a fresh, signed-out browser on the real app (lifespan run, the test's
    FakeClock injected)."""
    application: FastAPI = create_app(settings)
    opened: list[httpx.AsyncClient] = []

    async def new() -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=application), base_url="http://test"
        )
        opened.append(client)
        return client

    async with application.router.lifespan_context(application):
        application.state.runtime.clock = clock
        yield new
        for client in opened:
            await client.aclose()


def _token(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


async def _form(
    page: httpx.AsyncClient, url: str, fields: Mapping[str, str | list[str]], *, at: str = ""
) -> httpx.Response:
    """Open `at` (default `url`), then post its form with the CSRF token it carries."""
    shown = await page.get(at or url, headers=HTML)
    assert shown.status_code == 200, shown.text[:2000]
    return await page.post(url, data={"csrf_token": _token(shown.text), **fields}, headers=HTML)


def _create_team_with_the_cli(settings: Settings) -> str:
    """`taskdesk teams create` as an operator runs it; the printed link's path."""
    done = subprocess.run(
        [sys.executable, "-m", "taskdesk", "teams", "create", TEAM, "--admin", "boss@initech.test"],
        cwd=ROOT, env=settings_env(settings, public_url=PUBLIC), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"team '{TEAM}' created" in done.stdout and "as ADMIN" in done.stdout
    found = re.search(re.escape(PUBLIC) + r"(/invitations/[A-Za-z0-9_\-]+)", done.stdout)
    assert found, done.stdout
    return found.group(1)


async def _accept(browser: Browser, path: str, email: str) -> httpx.AsyncClient:
    """Open the invitation link, accept it with a name and password: signed in, on the tickets."""
    page = await browser()
    shown = await page.get(path, headers=HTML)
    assert shown.status_code == 200 and f"Join {TEAM}" in shown.text and email in shown.text
    name, password = PEOPLE[email]
    r = await _form(page, path, {"display_name": name, "password": password})
    assert r.status_code == 303 and r.headers["location"] == "/tickets", r.text[:2000]
    return page


async def _sign_in(browser: Browser, email: str) -> httpx.AsyncClient:
    page = await browser()
    fields = {"email": email, "password": PEOPLE[email][1], "next": "/tickets"}
    r = await _form(page, "/login", fields)
    assert r.status_code == 303 and r.headers["location"] == "/tickets", r.text[:2000]
    tickets = await page.get("/tickets")
    assert tickets.status_code == 200 and PEOPLE[email][0] in tickets.text
    return page


async def _send_queued_mail(rt: Runtime) -> None:
    """What a worker does with the waiting e-mails, here (sending to the SMTP server process)."""
    async with rt.engine.connect() as conn:
        q = "SELECT id, run FROM background_task WHERE kind = 'EMAIL' AND status = 'WAITING'"
        rows = (await conn.execute(sa.text(q))).all()
    for row in rows:
        assert await execute(rt, registry(), int(row.id), int(row.run)) == "done"


def _mail_to(smtp: SmtpServer, to: str, subject: str) -> EmailMessage | None:
    return next(
        (m for m in smtp.messages() if m["To"] == to and subject in str(m["Subject"])), None
    )


def _link(msg: EmailMessage, pattern: str) -> str:
    text = msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    found = re.search(re.escape(PUBLIC) + "(" + pattern + ")", text)
    assert found, text
    return found.group(1)


async def _invite(admin: httpx.AsyncClient, email: str, role: str) -> str:
    r = await _form(admin, "/members/invitations", {"email": email, "role": role}, at="/members")
    assert r.status_code == 201 and 'data-testid="invitation-link"' in r.text, r.text[:2000]
    shown = re.search(r'value="http://test(/invitations/[^"]+)"', r.text)
    assert shown, r.text
    return shown.group(1)


async def _new_ticket(page: httpx.AsyncClient, title: str) -> None:
    r = await _form(page, "/tickets", {"title": title, "body": "Details.", "priority": "HIGH"},
                    at="/tickets/new")  # fmt: skip
    assert r.status_code == 303 and r.headers["location"].startswith("/tickets/"), r.text[:2000]


def _next_monday_8(now: datetime, zone: ZoneInfo) -> datetime:
    local = now.astimezone(zone)
    day = local.replace(hour=8, minute=0, second=0, microsecond=0)
    day += timedelta(days=(7 - day.weekday()) % 7)
    return day if day > local else day + timedelta(days=7)


async def _exports_of(rt: Runtime, owner: int) -> list[int]:
    async with rt.engine.connect() as conn:
        q = "SELECT id FROM background_task WHERE kind = 'EXPORT' AND owner_id = :o ORDER BY id"
        return list((await conn.execute(sa.text(q), {"o": owner})).scalars())


async def _user_id(rt: Runtime, email: str) -> int:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT id FROM app_user WHERE email = :e")
        return int((await conn.execute(q, {"e": email})).scalar_one())


async def test_a_new_team_from_creation_to_its_first_scheduled_export(
    browser: Browser,
    rt: Runtime,
    settings: Settings,
    smtp: SmtpServer,
    tmp_path: Path,
    clock: FakeClock,
) -> None:
    rt.settings = rt.settings.model_copy(update={"smtp_url": smtp.url, "public_url": PUBLIC})
    # 1. The operator creates the team and its first admin's one-time link.
    boss_link = _create_team_with_the_cli(settings)
    # 2. The admin accepts it on the page and lands signed in on the team's tickets.
    boss = await _accept(browser, boss_link, "boss@initech.test")
    r = await boss.get("/tickets")
    assert r.status_code == 200 and TEAM in r.text and "Export these tickets" in r.text
    # 3. Invitations from the members page arrive by e-mail; their links work, once.
    shown = {
        "peter@initech.test": await _invite(boss, "peter@initech.test", "STAFF"),
        "milton@initech.test": await _invite(boss, "milton@initech.test", "CUSTOMER"),
    }
    await _send_queued_mail(rt)
    boss_mail = _mail_to(smtp, "boss@initech.test", TEAM)
    assert boss_mail is not None and _link(boss_mail, "/invitations/[A-Za-z0-9_-]+") == boss_link
    for email, path in shown.items():
        msg = _mail_to(smtp, email, TEAM)
        assert msg is not None, [(m["To"], m["Subject"]) for m in smtp.messages()]
        assert "Bill Lumbergh invited you to join the team Initech Support" in str(
            msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
        )
        assert _link(msg, "/invitations/[A-Za-z0-9_-]+") == path, "the e-mailed link is the one"
        await _accept(browser, path, email)
        r = await (await browser()).get(path, headers=HTML)
        assert r.status_code == 410 and "already accepted" in r.text
    peter = await _sign_in(browser, "peter@initech.test")
    milton = await _sign_in(browser, "milton@initech.test")
    assert "Assigned to" in (await peter.get("/tickets")).text  # the staff view
    # 4. The agent asks for "export ready" by e-mail and exports; a real worker runs it.
    worker = WorkerProcess(settings, tmp_path / "worker.log", smtp_url=smtp.url, public_url=PUBLIC)
    try:
        r = await _form(peter, "/settings/notifications", {"export_ready_email": "on"})
        assert r.status_code == 303 and r.headers["location"].endswith("?saved=1")
        r = await peter.get("/settings/notifications")
        assert re.search(r'name="export_ready_email"\s+checked', r.text), r.text
        await _new_ticket(peter, "Printer on fire")
        await _new_ticket(milton, "Cannot find my stapler")
        export_id = await _export(peter)
        await _wait_for_news(peter, export_id)
        msg = await _wait_for_mail(smtp, "peter@initech.test", f"Export #{export_id} is ready")
        assert worker.alive(), worker.log()
    finally:
        worker.stop()
    download = _link(msg, rf"/tasks/{export_id}/download")
    r = await peter.get(download)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "Printer on fire" in r.text and "Cannot find my stapler" in r.text
    # 5. The customer sees only what a customer may.
    r = await milton.get("/tickets")
    assert "My tickets" in r.text and "Cannot find my stapler" in r.text
    assert "Printer on fire" not in r.text and "Assigned to" not in r.text
    for url in ("/members", "/schedules", download):
        assert (await milton.get(url, headers=HTML)).status_code == 404, url
    # 6. A weekly schedule makes exactly one export for its occurrence.
    await _weekly_schedule(peter, rt, clock, await _user_id(rt, "peter@initech.test"), export_id)


async def _wait_for_mail(smtp: SmtpServer, to: str, subject: str) -> EmailMessage:
    async def arrived() -> EmailMessage | None:
        return _mail_to(smtp, to, subject)

    found = await wait_for(arrived, timeout=60, interval=0.5, what=f"the e-mail {subject!r}")
    assert found is not None
    return found


async def _export(page: httpx.AsyncClient) -> int:
    shown = await page.get("/tickets")
    key = re.search(r'name="idempotency_key" value="([^"]+)"', shown.text)
    assert key, shown.text
    data = {"csrf_token": _token(shown.text), "idempotency_key": key.group(1)}
    r = await page.post("/exports", data=data, headers={"HX-Request": "true"})
    found = re.search(r"Export #(\d+) is queued", r.text)
    assert r.status_code == 202 and found, r.text[:2000]
    return int(found.group(1))


async def _wait_for_news(page: httpx.AsyncClient, export_id: int) -> None:
    async def told() -> bool:
        r = await page.get("/notifications")
        return f"Export #{export_id} is ready" in r.text

    await wait_for(told, timeout=60, interval=0.5, what="the in-app 'export ready' news")
    r = await page.get("/notifications")
    assert f'href="/tasks/{export_id}/download"' in r.text


async def _weekly_schedule(
    page: httpx.AsyncClient, rt: Runtime, clock: FakeClock, agent: int, export_id: int
) -> None:
    shown = await page.get("/schedules")
    zone = re.search(r'name="timezone"[^>]*value="([^"]+)"', shown.text)
    assert shown.status_code == 200 and zone, shown.text
    tz = ZoneInfo(zone.group(1))
    form: dict[str, str | list[str]] = {
        "name": "Weekly TPS",
        "days": ["1"],
        "time": "08:00",
        "timezone": tz.key,
    }
    r = await _form(page, "/schedules", form)
    assert r.status_code == 303 and r.headers["location"] == "/schedules", r.text[:2000]
    due = _next_monday_8(clock.now, tz)
    r = await page.get("/schedules")
    assert "Weekly TPS" in r.text and due.strftime("%Y-%m-%d %H:%M") in r.text
    assert (await scheduler.run_once(rt, due - timedelta(seconds=1))).created == []
    clock.now = due
    made = (await scheduler.run_once(rt, due)).created
    assert len(made) == 1
    assert (await scheduler.run_once(rt, due)).created == [], "the occurrence already ran"
    clock.now = due + timedelta(minutes=5)
    assert (await scheduler.run_once(rt, clock.now)).created == []
    assert await _exports_of(rt, agent) == [export_id, made[0]]
    r = await page.get("/schedules")
    assert f"Export #{made[0]}" in r.text
    assert (due + timedelta(days=7)).strftime("%Y-%m-%d %H:%M") in r.text, "a week on"
