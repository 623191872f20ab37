"""Mail in against a real IMAP server process (a private Dovecot, tests/imap_server.py): a
fetch stores raw messages with the watermark and flags nothing; a second fetch finds nothing
new; the parse opens a ticket, threads a reply to our Message-ID into it, ignores an
auto-reply and keeps a garbage message raw and marked; a fetch repeated after its commit and a
parse run twice never duplicate anything. (docs/architecture.md, "Mail in")"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet
from pydantic import ValidationError

from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.core.settings import DEV_MAILBOX_KEY, Env, Settings
from desk.work import fetch, mail_parse, mailboxes
from desk.work.mailboxes import Mailbox
from jobs import scheduler
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.helpers import WorkerProcess, wait_for
from tests.imap_server import PASSWORD, USER, ImapServer, available


@pytest.fixture
def imap(rt: Runtime) -> Iterator[ImapServer]:
    # These fetches run on the cadence; IDLE has its own tests (tests/mail/test_idle.py).
    rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 0})
    why = available()
    if why:
        pytest.skip(why)
    # Not under pytest's tmp_path: as root, Dovecot's mail process (its own user) must reach it.
    root = Path(tempfile.mkdtemp(prefix="taskdesk-imap-"))
    server = ImapServer(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _mail(sender: str, subject: str, body: str, mid: str, **headers: str) -> bytes:
    extra = "".join(f"{k.replace('_', '-')}: {v}\r\n" for k, v in headers.items())
    return (
        f"From: Customer <{sender}>\r\nTo: help@acme.test\r\nSubject: {subject}\r\n"
        f"Message-ID: {mid}\r\nDate: Mon, 07 Dec 2026 10:00:00 +0000\r\n{extra}"
        f"Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()


async def _mailbox(rt: Runtime, world: World, imap: ImapServer) -> Mailbox:
    async with rt.engine.begin() as conn:
        return await mailboxes.create(
            conn, rt.settings, team_id=world.team, created_by_id=world.admin, host=imap.host,
            port=imap.port, use_tls=False, username=USER, password=PASSWORD, now=rt.clock(),
        )  # fmt: skip


async def _q(rt: Runtime, sql: str, **params: Any) -> list[Any]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql), params)).all())


async def _run_waiting(rt: Runtime, kind: str) -> str:
    [(task_id, run)] = await _q(
        rt, "SELECT id, run FROM background_task WHERE kind = :k AND status = 'WAITING'", k=kind
    )
    return await execute(rt, registry(), task_id, run)


async def test_a_fetch_stores_raw_mail_with_the_watermark_and_flags_nothing(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    for n in range(3):
        imap.append(_mail("ann@cust.test", f"Printer {n}", "It jams.", f"<p{n}@cust.test>"))
    box = await _mailbox(rt, world, imap)
    assert await _run_waiting(rt, "MAIL_FETCH") == "done"
    stored = await _q(rt, "SELECT uid, message_id, raw FROM inbound_mail ORDER BY uid")
    assert [(r.uid, r.message_id) for r in stored] == [
        (1, "<p0@cust.test>"), (2, "<p1@cust.test>"), (3, "<p2@cust.test>"),
    ]  # fmt: skip
    assert b"It jams." in bytes(stored[0].raw)
    [mb] = await _q(
        rt, "SELECT last_uid, uidvalidity, last_error FROM mailbox WHERE id = :i", i=box.id
    )
    assert mb.last_uid == 3 and mb.uidvalidity and mb.last_error is None
    assert all(b"Seen" not in f for f in imap.flags())  # nothing flagged on the server
    # The fetch queued the parse and the next fetch (one cadence later); that one finds nothing.
    kinds = await _q(
        rt, "SELECT kind, run_at FROM background_task WHERE status = 'WAITING' ORDER BY kind"
    )
    assert [k.kind for k in kinds] == ["MAIL_FETCH", "MAIL_PARSE"]
    assert (kinds[0].run_at - rt.clock()).total_seconds() == 30
    assert await _run_waiting(rt, "MAIL_FETCH") == "done"
    assert len(await _q(rt, "SELECT id FROM inbound_mail")) == 3


async def test_parse_opens_a_ticket_and_threads_a_reply_to_our_message_id(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    imap.append(_mail("bob@cust.test", "Refund please", "Order 17 never came.", "<r1@cust.test>"))
    box = await _mailbox(rt, world, imap)
    await _run_waiting(rt, "MAIL_FETCH")
    assert await _run_waiting(rt, "MAIL_PARSE") == "done"
    [t] = await _q(rt, "SELECT t.id, t.title, t.body, t.team_id, u.email, m.role FROM ticket t "
                   "JOIN app_user u ON u.id = t.creator_id JOIN membership m ON m.user_id = u.id "
                   "AND m.team_id = t.team_id WHERE t.title = 'Refund please'")  # fmt: skip
    assert (t.team_id, t.email, t.role) == (world.team, "bob@cust.test", "CUSTOMER")
    assert "Order 17 never came." in t.body
    [(first,)] = await _q(rt, "SELECT id FROM ticket_message WHERE ticket_id = :t", t=t.id)
    ours = f"<taskdesk-ticket-{t.id}-{first}@desk.acme.test>"
    imap.append(_mail("bob@cust.test", "Re: Refund please", "Still waiting.", "<r2@cust.test>",
                      In_Reply_To=ours, References=ours))  # fmt: skip
    await _run_waiting(rt, "MAIL_FETCH")
    await _run_waiting(rt, "MAIL_PARSE")
    bodies = await _q(
        rt, "SELECT body FROM ticket_message WHERE ticket_id = :t ORDER BY id", t=t.id
    )
    assert [b.body for b in bodies][1].startswith("Still waiting.")
    rows = await _q(
        rt,
        "SELECT outcome, ticket_id FROM inbound_mail WHERE mailbox_id = :b ORDER BY id",
        b=box.id,
    )
    assert [(r.outcome, r.ticket_id) for r in rows] == [("ticket", t.id), ("reply", t.id)]


async def test_auto_replies_are_ignored_and_garbage_is_kept_raw_and_marked(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    imap.append(_mail("ooo@cust.test", "Out of office", "Back Monday.", "<a1@cust.test>",
                      Auto_Submitted="auto-replied"))  # fmt: skip
    garbage = b"\x00\xff\xfe not a message at all \x00\r\n\r\n\x00"
    imap.append(garbage)
    await _mailbox(rt, world, imap)
    await _run_waiting(rt, "MAIL_FETCH")
    await _run_waiting(rt, "MAIL_PARSE")
    rows = await _q(
        rt, "SELECT outcome, ticket_id, problem, raw, parsed_at FROM inbound_mail ORDER BY uid"
    )
    assert [(r.outcome, r.ticket_id) for r in rows] == [("automatic", None), ("unreadable", None)]
    assert all(r.parsed_at is not None and r.problem for r in rows)
    assert b"not a message at all" in bytes(rows[1].raw)  # kept as the server gave it
    assert await _q(rt, "SELECT id FROM ticket WHERE title = 'Out of office'") == []


async def test_a_fetch_repeated_after_its_commit_and_a_parse_run_twice_duplicate_nothing(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    for n in range(3):
        imap.append(_mail("cy@cust.test", f"Twice {n}", "Once only.", f"<t{n}@cust.test>"))
    box = await _mailbox(rt, world, imap)  # read before any fetch: a rescued execution's view

    async def commit(validity: int, batch: list[fetch.Fetched]) -> None:
        async with rt.engine.begin() as conn:
            await fetch.store_batch(conn, box, validity, batch, now=rt.clock())

    # The first execution committed and was killed before its finish; the rescued one (with
    # the watermark it read before) fetches and stores the same messages again.
    assert await fetch.fetch_new(box, PASSWORD, commit) == 3
    assert await fetch.fetch_new(box, PASSWORD, commit) == 3
    ids = [r.id for r in await _q(rt, "SELECT id FROM inbound_mail ORDER BY id")]
    assert len(ids) == 3
    # Two parsers of the same rows at once: each row makes one ticket.
    await asyncio.gather(*(mail_parse.parse_one(rt, box, i) for i in ids + ids))
    await asyncio.gather(mail_parse.parse_pending(rt, box), mail_parse.parse_pending(rt, box))
    titles = await _q(rt, "SELECT title FROM ticket WHERE title LIKE 'Twice %' ORDER BY title")
    assert [t.title for t in titles] == ["Twice 0", "Twice 1", "Twice 2"]
    assert await _run_waiting(rt, "MAIL_FETCH") == "done"  # the queued fetch: nothing new
    assert len(await _q(rt, "SELECT id FROM inbound_mail")) == 3


async def test_a_wrong_password_says_what_failed_and_is_retried(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    async with rt.engine.begin() as conn:
        box = await mailboxes.create(
            conn, rt.settings, team_id=world.team, created_by_id=world.admin, host=imap.host,
            port=imap.port, use_tls=False, username=USER, password="wrong", now=rt.clock(),
        )  # fmt: skip
    assert await _run_waiting(rt, "MAIL_FETCH") == "retry"
    [mb] = await _q(rt, "SELECT last_error FROM mailbox WHERE id = :i", i=box.id)
    assert "login refused" in mb.last_error
    [stored] = await _q(rt, "SELECT password_enc FROM mailbox WHERE id = :i", i=box.id)
    assert b"wrong" not in bytes(stored.password_enc)  # encrypted at rest
    # Its last attempt used, the fetch fails for good; the scheduler's pass starts a new one.
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE background_task SET status = 'FAILED', run = run + 1, "
                                   "finished_at = now() WHERE kind = 'MAIL_FETCH'"))  # fmt: skip
    await scheduler.run_once(rt)
    await scheduler.run_once(rt)  # a second pass adds none
    waiting = await _q(
        rt, "SELECT run_at FROM background_task WHERE kind = 'MAIL_FETCH' AND status = 'WAITING'"
    )
    assert [(w.run_at - rt.clock()).total_seconds() for w in waiting] == [30]


def test_the_mailbox_key_is_checked_at_start() -> None:
    with pytest.raises(ValidationError, match="Fernet key"):
        Settings(mailbox_key="short")
    with pytest.raises(ValidationError, match="dev key"):
        Settings(taskdesk_env=Env.PROD, secret_key="x" * 32, mailbox_key=DEV_MAILBOX_KEY)
    key = Fernet.generate_key().decode()
    made = Settings(taskdesk_env=Env.PROD, secret_key="x" * 32, mailbox_key=key)
    sealed = mailboxes.encrypt(made, "hunter2")
    assert b"hunter2" not in sealed
    box = Mailbox(1, 1, 1, "h", 1, False, "u", "INBOX", 30, None, 0, True, sealed)
    assert box.password(made) == "hunter2"
    with pytest.raises(ValueError, match="another MAILBOX_KEY"):
        box.password(Settings(taskdesk_env=Env.DEV))
    with pytest.raises(ValueError, match="MAILBOX_KEY is not set"):
        box.password(Settings(taskdesk_env=Env.PROD, secret_key="x" * 32))


@pytest.mark.slow
async def test_a_real_worker_turns_a_mail_into_a_ticket_and_fetches_again(
    rt: Runtime, world: World, settings: Settings, imap: ImapServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    imap.append(_mail("dee@cust.test", "Worker made", "Via the worker.", "<w1@cust.test>"))
    worker = WorkerProcess(settings, tmp_path / "worker.log", lease_seconds=2)
    try:
        box = await _mailbox(rt, world, imap)

        async def ticket() -> bool:
            return bool(await _q(rt, "SELECT id FROM ticket WHERE title = 'Worker made'"))

        await wait_for(ticket, timeout=60, what="the fetched mail to become a ticket")
        async with rt.engine.begin() as conn:  # the next fetch due now instead of in 30 s
            await conn.execute(sa.text("UPDATE background_task SET run_at = now() "
                                       "WHERE kind = 'MAIL_FETCH' AND status = 'WAITING'"))  # fmt: skip
        imap.append(_mail("dee@cust.test", "Worker again", "Second.", "<w2@cust.test>"))

        async def second() -> bool:
            return bool(await _q(rt, "SELECT id FROM ticket WHERE title = 'Worker again'"))

        await wait_for(second, timeout=60, what="the second mail to become a ticket")
    finally:
        worker.stop()
    rows = await _q(rt, "SELECT outcome FROM inbound_mail WHERE mailbox_id = :b", b=box.id)
    assert [r.outcome for r in rows] == ["ticket", "ticket"]


@pytest.mark.slow
async def test_kill_9_mid_parse_makes_every_message_one_ticket(
    rt: Runtime, world: World, settings: Settings, imap: ImapServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    n = 300
    imap.append_many(
        # One sender each: one sender's 300 would be a flood (INBOUND_FLOOD_MAX), mostly throttled.
        [
            _mail(f"eve{i:03d}@cust.test", f"Drill {i:03d}", "Once.", f"<d{i}@cust.test>")
            for i in range(n)
        ]
    )
    await _mailbox(rt, world, imap)

    async def tickets() -> int:
        return len(await _q(rt, "SELECT id FROM ticket WHERE title LIKE 'Drill %'"))

    first = WorkerProcess(settings, tmp_path / "w1.log", lease_seconds=2, heartbeat_ttl_seconds=3)
    try:
        await wait_for(lambda: _some(tickets), timeout=60, what="the parse to be under way")
        first.kill()
        at_kill = await tickets()
    finally:
        first.stop()
    second = WorkerProcess(settings, tmp_path / "w2.log", lease_seconds=2, heartbeat_ttl_seconds=3)
    try:
        await wait_for(lambda: _all(tickets, n), timeout=90, what="every message to be a ticket")
    finally:
        second.stop()
    assert 0 < at_kill < n  # the kill landed mid-parse
    titles = await _q(rt, "SELECT title FROM ticket WHERE title LIKE 'Drill %'")
    assert len(titles) == len({t.title for t in titles}) == n
    parsed = await _q(rt, "SELECT count(*) AS c FROM inbound_mail WHERE outcome = 'ticket'")
    assert parsed[0].c == n


async def _some(count: Any) -> bool:
    return bool(await count() > 0)


async def _all(count: Any, n: int) -> bool:
    return bool(await count() >= n)
