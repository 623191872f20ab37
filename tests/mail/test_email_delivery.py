"""EMAIL tasks against a real SMTP server process: delivered by a real worker, the same message
again after a kill -9 between the server's accept and the ledger's commit, 4xx retried,
5xx failed with the reply (and grouped in the console)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from desk.console import failures
from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people.operators import Scope
from desk.work import mail
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.helpers import WorkerProcess, wait_for
from tests.smtp_server import SmtpServer

EXPIRES = datetime(2026, 12, 10, 8, 0, tzinfo=UTC)
PARAMS: dict[str, object] = {
    "task_id": 41, "team_name": "Acme", "rows": 2, "link": "/tasks/41/download",
    "expires_at": EXPIRES,
}  # fmt: skip


async def _queue(rt: Runtime, to: str, *, locale: str = "en", zone: str = "UTC") -> int:
    async with rt.engine.begin() as conn:
        return await mail.queue_email(
            conn, to=to, template="export_ready", params=PARAMS, locale=locale,
            timezone=zone, team_id=None, user_id=None, now=rt.clock(),
        )  # fmt: skip


async def _row(rt: Runtime, task_id: int) -> sa.Row[tuple[object, ...]]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM background_task WHERE id = :i")
        return (await conn.execute(q, {"i": task_id})).one()


async def _run(rt: Runtime, task_id: int) -> str:
    return await execute(rt, registry(), task_id, (await _row(rt, task_id)).run)


def _worker(settings: Settings, log: Path, smtp: SmtpServer) -> WorkerProcess:
    return WorkerProcess(
        settings, log, smtp_url=smtp.url, public_url="https://desk.acme.test",
        lease_seconds=2, heartbeat_ttl_seconds=3,
    )  # fmt: skip


@pytest.mark.slow
async def test_a_real_worker_delivers_text_and_html_in_the_recipients_language(
    rt: Runtime, world: World, settings: Settings, smtp: SmtpServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    worker = _worker(settings, tmp_path / "worker.log", smtp)
    try:
        task_id = await _queue(rt, "lin@acme.test", locale="zh-Hans", zone="Asia/Shanghai")
        await wait_for(lambda: _done(rt, task_id), timeout=30, what="the e-mail task to complete")
    finally:
        worker.stop()
    [msg] = smtp.messages()
    assert msg["Message-ID"] == f"<taskdesk-task-{task_id}@desk.acme.test>"
    assert msg["To"] == "lin@acme.test" and msg["Subject"] == "导出 #41 已完成"
    text, html = msg.get_body(("plain",)), msg.get_body(("html",))
    assert text is not None and html is not None
    assert "2026年12月10日 16:00" in text.get_content()  # type: ignore[attr-defined]
    assert 'href="https://desk.acme.test/tasks/41/download"' in html.get_content()  # type: ignore[attr-defined]
    row = await _row(rt, task_id)
    assert (row.status, row.summary_key, row.attempts) == ("COMPLETED", "email.sent", 1)


async def _done(rt: Runtime, task_id: int) -> bool:
    return bool((await _row(rt, task_id)).status == "COMPLETED")


@pytest.mark.slow
async def test_kill_9_between_accept_and_commit_sends_the_same_message_again(
    rt: Runtime, world: World, settings: Settings, smtp: SmtpServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    first = _worker(settings, tmp_path / "first.log", smtp)
    smtp.kill_after_data(first.pid)
    try:
        task_id = await _queue(rt, "chen@acme.test")

        async def killed() -> bool:
            return len(smtp.raw()) == 1 and not first.alive()

        await wait_for(killed, timeout=30, what="the first copy stored and its sender killed")
        assert (await _row(rt, task_id)).status == "RUNNING"  # the ledger never heard of the 250
    finally:
        first.stop()
    second = _worker(settings, tmp_path / "second.log", smtp)
    try:
        await wait_for(lambda: _done(rt, task_id), timeout=60, what="the rescued e-mail sent")
    finally:
        second.stop()
    one, two = smtp.messages()
    assert one["Message-ID"] == two["Message-ID"] == f"<taskdesk-task-{task_id}@desk.acme.test>"
    assert one.as_bytes() == two.as_bytes()  # the same message, not merely the same id
    row = await _row(rt, task_id)
    assert (row.attempts, row.run) == (2, 2)


async def test_a_4xx_answer_retries_and_then_delivers_once(
    mail_rt: Runtime, world: World, smtp: SmtpServer
) -> None:
    rt = mail_rt
    task_id = await _queue(rt, "tempfail+lin@acme.test")
    assert await _run(rt, task_id) == "retry"
    row = await _row(rt, task_id)
    assert (row.status, row.error_key) == ("WAITING", "email.deferred")
    assert row.last_error.startswith('The mail server deferred the message: "451 4.3.0')
    assert smtp.raw() == []
    rt.clock.advance(5)  # type: ignore[attr-defined]  # past the backoff
    assert await _run(rt, task_id) == "done"
    assert len(smtp.messages()) == 1
    row = await _row(rt, task_id)
    assert (row.status, row.attempts) == ("COMPLETED", 2)


async def test_a_5xx_answer_fails_with_the_reply_in_the_console(
    mail_rt: Runtime, world: World, smtp: SmtpServer
) -> None:
    rt = mail_rt
    ids = [await _queue(rt, f"reject+{n}@acme.test") for n in ("a", "b")]
    for task_id in ids:
        assert await _run(rt, task_id) == "failed"
    row = await _row(rt, ids[0])
    assert (row.status, row.attempts, row.error_key) == ("FAILED", 1, "email.rejected")
    assert "550 5.1.1 <reject+a@acme.test>: mailbox unavailable" in row.last_error
    assert row.error_params["reply"].startswith("550 5.1.1")
    assert smtp.raw() == []
    operator = Scope(world.admin, "ops@acme.test", operator=True, team_ids=())
    [group] = await failures.groups(rt, operator)
    assert group.failed == 2 and group.kinds == ["EMAIL"] and group.sample_key == "email.rejected"
    assert group.error == "The mail server refused the message: …"


async def test_an_unreachable_server_is_retried(mail_rt: Runtime, world: World) -> None:
    rt = mail_rt
    rt.settings = rt.settings.model_copy(update={"smtp_url": "smtp://127.0.0.1:9"})
    task_id = await _queue(rt, "lin@acme.test")
    assert await _run(rt, task_id) == "retry"
    row = await _row(rt, task_id)
    assert (row.status, row.error_key) == ("WAITING", "email.unreachable")


async def test_no_mail_server_fails_saying_so(rt: Runtime, world: World) -> None:
    assert rt.settings.smtp_url == ""
    task_id = await _queue(rt, "lin@acme.test")
    assert await _run(rt, task_id) == "failed"
    row = await _row(rt, task_id)
    assert (row.status, row.error_key) == ("FAILED", "email.no_server")
    assert row.last_error == "No mail server is configured (set SMTP_URL)."
