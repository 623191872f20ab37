"""A conversation's e-mails against a real SMTP server and worker process: a reply reaches the
other side threaded (Message-ID per message, In-Reply-To and References), in the recipient's
language; a kill -9 between the server's accept and the ledger's commit sends the same message
again; a post that rolls back sends nothing; a database connection cut while a customer posts
leaves the whole message (with its file and its e-mail task) or nothing."""

from __future__ import annotations

import io
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.errors import TooLarge
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.work import conversation
from tests.factories import World
from tests.helpers import WorkerProcess, wait_for
from tests.smtp_server import SmtpServer

HOST = "desk.acme.test"


def _worker(settings: Settings, log: Path, smtp: SmtpServer) -> WorkerProcess:
    return WorkerProcess(
        settings, log, smtp_url=smtp.url, public_url=f"https://{HOST}",
        lease_seconds=2, heartbeat_ttl_seconds=3,
    )  # fmt: skip


async def _email_states(rt: Runtime) -> list[str]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT status FROM background_task WHERE kind = 'EMAIL' ORDER BY id")
        return [r.status for r in await conn.execute(q)]


async def _all_sent(rt: Runtime, n: int) -> bool:
    return await _email_states(rt) == ["COMPLETED"] * n


async def _set_locale(rt: Runtime, user_id: int, locale: str) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = :l, email = email WHERE id = :u"),
            {"l": locale, "u": user_id},
        )


@pytest.mark.slow
async def test_replies_reach_the_other_side_threaded_in_their_language(
    rt: Runtime, world: World, settings: Settings, smtp: SmtpServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    await _set_locale(rt, world.customer, "zh-Hans")
    ticket = world.tickets["login"]  # Lin's, assigned to Chen
    worker = _worker(settings, tmp_path / "worker.log", smtp)
    try:
        asked = await conversation.post_message(rt, world.customer, ticket, "还是无法登录")
        answered = await conversation.post_message(
            rt, world.staff, ticket, "Please try again now.", set_status="PENDING"
        )
        await wait_for(lambda: _all_sent(rt, 2), timeout=60, what="both e-mails delivered")
    finally:
        worker.stop()
    to_chen, to_lin = sorted(smtp.messages(), key=lambda m: m["To"] != "chen@acme.test")
    ask_id = f"<taskdesk-ticket-{ticket}-{asked.message.id}@{HOST}>"
    assert to_chen["Message-ID"] == ask_id
    chen_text = to_chen.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert "还是无法登录" in chen_text
    assert to_lin["Message-ID"] == f"<taskdesk-ticket-{ticket}-{answered.message.id}@{HOST}>"
    assert to_lin["In-Reply-To"] == ask_id and ask_id in to_lin["References"]
    assert to_lin["Subject"] == f"回复：[#{ticket}] Cannot log in"  # noqa: RUF001
    assert f"https://{HOST}/tickets/{ticket}" in to_lin.get_body(("plain",)).get_content()  # type: ignore[union-attr]


@pytest.mark.slow
async def test_kill_9_between_accept_and_commit_resends_the_same_reply(
    rt: Runtime, world: World, settings: Settings, smtp: SmtpServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    first = _worker(settings, tmp_path / "first.log", smtp)
    smtp.kill_after_data(first.pid)
    try:
        posted = await conversation.post_message(rt, world.staff, world.tickets["login"], "Fixed.")

        async def killed() -> bool:
            return len(smtp.raw()) == 1 and not first.alive()

        await wait_for(killed, timeout=30, what="the first copy stored and its sender killed")
    finally:
        first.stop()
    second = _worker(settings, tmp_path / "second.log", smtp)
    try:
        await wait_for(lambda: _all_sent(rt, 1), timeout=60, what="the rescued e-mail sent")
    finally:
        second.stop()
    one, two = smtp.messages()
    token = conversation.token(world.tickets["login"], posted.message.id)
    assert one["Message-ID"] == two["Message-ID"] == f"<taskdesk-{token}@{HOST}>"
    assert one.as_bytes() == two.as_bytes()


class Upload:
    """A file whose reading can be cut: `cut` runs once, after the first chunk is read."""

    def __init__(self, data: bytes, cut=None) -> None:
        self.buf, self.cut = io.BytesIO(data), cut

    async def read(self, size: int = -1) -> bytes:
        data = self.buf.read(size)
        if self.cut is not None and self.buf.tell() > size:
            cut, self.cut = self.cut, None
            await cut()
        return data

    async def seek(self, at: int) -> None:
        self.buf.seek(at)


async def _counts(rt: Runtime) -> tuple[int, int, int, int]:
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(
                    "SELECT (SELECT count(*) FROM ticket_message), "
                    "(SELECT count(*) FROM message_attachment), "
                    "(SELECT count(*) FROM attachment_chunk), "
                    "(SELECT count(*) FROM background_task WHERE kind = 'EMAIL')"
                )
            )
        ).one()
    return tuple(row)  # type: ignore[return-value]


async def test_a_post_that_rolls_back_sends_nothing(rt: Runtime, world: World) -> None:
    rt.settings = rt.settings.model_copy(update={"attachment_max_bytes": 300_000})
    files = [
        conversation.IncomingFile("ok.txt", Upload(b"fine")),
        conversation.IncomingFile("big.bin", Upload(b"\x00" * 600_000)),
    ]
    with pytest.raises(TooLarge):
        await conversation.post_message(rt, world.staff, world.tickets["login"], "hi", files=files)
    assert await _counts(rt) == (0, 0, 0, 0), "no message, file or e-mail task was left"


async def test_the_connection_cut_mid_post_leaves_all_or_nothing(
    rt: Runtime, world: World, settings: Settings
) -> None:
    async def cut_every_connection() -> None:
        # What a PostgreSQL restart does to the web's connections: each one ends mid-transaction.
        async with await psycopg.AsyncConnection.connect(settings.database_url) as admin:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )

    data = b"\x89PNG\r\n\x1a\n" + b"x" * 700_000
    files = [conversation.IncomingFile("shot.png", Upload(data, cut_every_connection))]
    try:
        posted = await conversation.post_message(
            rt, world.customer, world.tickets["login"], "see the screenshot", files=files
        )
    except Exception:  # an outage may surface; what matters is what is left
        posted = None
    counts = await _counts(rt)
    if posted is None:
        assert counts == (0, 0, 0, 0)
    else:
        assert counts == (1, 1, 3, 1), "the whole message: its file's three chunks and its e-mail"
        assert posted.attachments[0].size == len(data)
