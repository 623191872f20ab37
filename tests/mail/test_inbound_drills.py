"""Drills of mail in with real processes (issue 42; docs/architecture.md, "Mail in"): a real
Dovecot (tests/imap_server.py) behind a TCP proxy that slows or cuts the connection, real worker
processes killed with SIGKILL, a private PostgreSQL stopped and started mid-batch. Each ends with
every message stored once and made into exactly one ticket (counted by Message-ID). A kill -9
mid-parse of replies posts each reply and its e-mails once (tests/mail/test_mailboxes.py has the
one of new tickets). A mail loop — two of the desk's mailboxes forwarding to each other, two
auto-responders answering through a ticket — stops by itself (Auto-Submitted, the loop guard)
within a bounded number of messages."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from desk.work import conversation, mail_gate, mail_parse, mailboxes
from desk.work.mailboxes import Mailbox
from jobs.execution import execute
from jobs.processors import registry
from taskdesk import migrate
from taskdesk.embedded import PostgresServer
from tests.factories import World, add_ticket, make_world
from tests.helpers import WorkerProcess, wait_for, wait_until
from tests.imap_server import PASSWORD, USER, ImapServer, Proxy, available, running
from tests.mail.inbound_helpers import mail, mailbox, q
from tests.smtp_server import SmtpServer


@pytest.fixture
def imap() -> Iterator[ImapServer]:
    why = available()
    if why:
        pytest.skip(why)
    with running() as server:
        yield server


@pytest.fixture
def proxy(imap: ImapServer) -> Iterator[Proxy]:
    p = Proxy(imap.port)
    yield p
    p.close()


def _fill(imap: ImapServer, n: int, tag: str) -> None:
    # One sender each: one sender's n would be a flood (INBOUND_FLOOD_MAX), mostly throttled.
    imap.append_many(
        [
            mail(f"c{i:03d}@cust.test", f"{tag} {i:03d}", "Once.", f"<{tag}{i}@cust.test>")
            for i in range(n)
        ]
    )


async def _mailbox(rt: Runtime, team: int, admin: int, proxy: Proxy) -> Mailbox:
    async with rt.engine.begin() as conn:
        return await mailboxes.create(
            conn, rt.settings, team_id=team, created_by_id=admin, host=proxy.host,
            port=proxy.port, use_tls=False, username=USER, password=PASSWORD, now=rt.clock(),
        )  # fmt: skip


async def _stored(rt: Runtime, box: Mailbox) -> int:
    found = await q(rt, "SELECT count(*) AS c FROM inbound_mail WHERE mailbox_id = :b", b=box.id)
    return int(found[0].c)


async def _tickets(rt: Runtime, box: Mailbox) -> int:
    found = await q(
        rt, "SELECT count(*) AS c FROM inbound_mail WHERE mailbox_id = :b AND ticket_id IS NOT NULL",
        b=box.id,
    )  # fmt: skip
    return int(found[0].c)


async def _exactly_once(rt: Runtime, box: Mailbox, n: int, tag: str) -> None:
    """n messages stored, one row each, each made into its own ticket with its title."""
    stored = await q(
        rt, "SELECT message_id, outcome, ticket_id FROM inbound_mail WHERE mailbox_id = :b",
        b=box.id,
    )  # fmt: skip
    assert len(stored) == len({s.message_id for s in stored}) == n
    assert {s.outcome for s in stored} == {"ticket"}
    assert len({s.ticket_id for s in stored}) == n
    titles = await q(rt, "SELECT title FROM ticket WHERE title LIKE :t", t=f"{tag} %")
    assert len(titles) == len({t.title for t in titles}) == n


async def _run_waiting(rt: Runtime, kind: str) -> str:
    async with rt.engine.begin() as conn:  # a retry due now instead of after its backoff
        await conn.execute(
            sa.text(
                "UPDATE background_task SET run_at = :n WHERE kind = :k AND status = 'WAITING'"
            ),
            {"n": rt.clock(), "k": kind},
        )
    [task] = await q(
        rt, "SELECT id, run FROM background_task WHERE kind = :k AND status = 'WAITING'", k=kind
    )
    return await execute(rt, registry(), task.id, task.run)


async def test_the_server_dropping_the_connection_mid_fetch_loses_and_repeats_nothing(
    rt: Runtime, world: World, proxy: Proxy, imap: ImapServer
) -> None:
    n, tag = 120, "Drop"
    rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 0, "mail_fetch_batch": 10})
    _fill(imap, n, tag)
    proxy.cuts = [12_000, 12_000]  # the first two connections end mid-fetch, the third does not
    box = await _mailbox(rt, world.team, world.admin, proxy)
    assert await _run_waiting(rt, "MAIL_FETCH") == "retry"
    [mb] = await q(rt, "SELECT last_uid, last_error FROM mailbox WHERE id = :b", b=box.id)
    first = await _stored(rt, box)
    assert 0 < first < n and mb.last_uid == first  # the committed batches and their watermark
    assert "closed the connection" in mb.last_error or "fetch failed" in mb.last_error
    assert await _run_waiting(rt, "MAIL_FETCH") == "retry"
    assert first < await _stored(rt, box) < n  # it went on after the watermark
    assert await _run_waiting(rt, "MAIL_FETCH") == "done"
    assert (proxy.cut, proxy.connections) == (2, 3)
    [mb] = await q(rt, "SELECT last_uid, last_error FROM mailbox WHERE id = :b", b=box.id)
    assert (mb.last_uid, mb.last_error) == (n, None)  # the error cleared once it worked
    await mail_parse.parse_pending(rt, box, limit=n)
    await _exactly_once(rt, box, n, tag)


def _worker(settings: Settings, log: Path, **more: object) -> WorkerProcess:
    return WorkerProcess(
        settings, log, lease_seconds=2, heartbeat_ttl_seconds=3, mail_fetch_batch=5,
        mail_idle_seconds=0, **more,
    )  # fmt: skip


@pytest.mark.slow
async def test_kill_9_mid_fetch_stores_and_tickets_every_message_once(
    rt: Runtime, world: World, settings: Settings, proxy: Proxy, imap: ImapServer, tmp_path: Path
) -> None:
    rt.clock = utcnow
    n, tag = 300, "Killed"
    _fill(imap, n, tag)
    proxy.rate = 8_000  # bytes a second: the fetch takes a while, so the kill lands inside it
    box = await _mailbox(rt, world.team, world.admin, proxy)
    first = _worker(settings, tmp_path / "w1.log")
    try:
        await wait_for(lambda: _at_least(_stored(rt, box), 30), timeout=60, what="batches stored")
        first.kill()
        at_kill = await _stored(rt, box)
    finally:
        first.stop()
    assert at_kill < n, "the kill landed mid-fetch"
    proxy.rate = None
    second = _worker(settings, tmp_path / "w2.log")
    try:
        await wait_for(lambda: _at_least(_tickets(rt, box), n), timeout=120, what="every ticket")
    finally:
        second.stop()
    await _exactly_once(rt, box, n, tag)


async def _at_least(count: Any, n: int) -> bool:
    return bool(await count >= n)


@pytest.fixture
def private_pg(tmp_path: Path) -> Iterator[PostgresServer]:
    pg = PostgresServer(tmp_path / "pg", fast=True)
    pg.start()
    migrate.upgrade(pg.url)
    yield pg
    pg.stop()
    if pg.root.parent == Path("/var/tmp"):  # where the launcher puts clusters when run as root
        shutil.rmtree(pg.root, ignore_errors=True)


@pytest.fixture
async def pg_rt(private_pg: PostgresServer, settings: Settings) -> AsyncIterator[Runtime]:
    s = load_settings(
        taskdesk_env="test", database_url=private_pg.url, redis_url=settings.redis_url,
        queue_prefix=settings.queue_prefix, secret_key=settings.secret_key,
    )  # fmt: skip
    runtime = await Runtime.open(s)
    yield runtime
    await runtime.close()


@pytest.mark.slow
async def test_the_database_restarting_mid_batch_stores_and_tickets_every_message_once(
    pg_rt: Runtime, private_pg: PostgresServer, proxy: Proxy, imap: ImapServer, tmp_path: Path
) -> None:
    rt = pg_rt
    n, tag = 300, "Outage"
    _fill(imap, n, tag)
    world = await make_world(rt)
    proxy.rate = 8_000
    box = await _mailbox(rt, world.team, world.admin, proxy)
    worker = _worker(rt.settings, tmp_path / "worker.log")
    try:
        await wait_for(lambda: _at_least(_stored(rt, box), 30), timeout=60, what="batches stored")
        at_stop = await _stored(rt, box)
        private_pg.stop()  # mid-fetch: the next batch's commit finds no database
        wait_until(
            lambda: worker.log().count("dispatcher pass failed") >= 3, 90, "a few failed passes"
        )
        private_pg.start()
        proxy.rate = None
        await wait_for(lambda: _at_least(_tickets(rt, box), n), timeout=150, what="every ticket")
    finally:
        worker.stop()
    assert at_stop < n, "the outage landed mid-fetch"
    await _exactly_once(rt, box, n, tag)


# A mail loop: what the desk sends is delivered back into a mailbox (`deliver` says where, and
# what a relay or an auto-responder makes of it); the rounds go on until nothing more is sent.
Deliver = Callable[[EmailMessage], list[tuple[str, bytes]]]


async def _loop(rt: Runtime, smtp: SmtpServer, imap: ImapServer, boxes: list[Mailbox],
                deliver: Deliver, *, limit: int = 40) -> int:  # fmt: skip
    """Rounds until the desk sends nothing new; returns how many mails were delivered."""
    seen = delivered = 0
    for _ in range(limit):
        for box in boxes:
            await _run_scoped(rt, "MAIL_FETCH", box)
            await _run_scoped(rt, "MAIL_PARSE", box)
        for task in await q(rt, "SELECT id, run FROM background_task WHERE kind = 'EMAIL' "
                            "AND status = 'WAITING' ORDER BY id"):  # fmt: skip
            assert await execute(rt, registry(), task.id, task.run) == "done"
        sent = smtp.messages()[seen:]
        seen += len(sent)
        out = [d for m in sent for d in deliver(m)]
        if not out:
            return delivered
        for folder, raw in out:
            imap.append(raw, folder)
        delivered += len(out)
    raise AssertionError(f"the loop did not stop: {delivered} mails in {limit} rounds")


async def _run_scoped(rt: Runtime, kind: str, box: Mailbox) -> None:
    found = await q(
        rt, "SELECT id, run FROM background_task WHERE kind = :k AND status = 'WAITING' "
        "AND scope_key = :s", k=kind, s=mailboxes.scope(box.id),
    )  # fmt: skip
    for task in found:
        assert await execute(rt, registry(), task.id, task.run) == "done"


async def _user(rt: Runtime, team: int, email: str, role: str) -> int:
    async with rt.engine.begin() as conn:
        uid = (await conn.execute(sa.text(
            "INSERT INTO app_user (email, display_name) VALUES (:e, :e) RETURNING id"
        ), {"e": email})).scalar_one()  # fmt: skip
        await conn.execute(
            sa.text("INSERT INTO membership (user_id, team_id, role) VALUES (:u, :t, :r)"),
            {"u": uid, "t": team, "r": role},
        )
    return int(uid)


@pytest.mark.parametrize("relay_strips_headers", [False, True])
async def test_two_desk_mailboxes_forwarding_to_each_other_stop_by_themselves(
    mail_rt: Runtime, world: World, smtp: SmtpServer, imap: ImapServer, relay_strips_headers: bool
) -> None:
    rt = mail_rt
    rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 0})
    for folder in ("A", "B"):
        imap.create_folder(folder)
    # Each team's assignee forwards to the other team's mailbox.
    to_b = await _user(rt, world.team, "help-b@loop.test", "STAFF")
    await _user(rt, world.other_team, "help-a@loop.test", "STAFF")
    ticket = await add_ticket(rt, world.team, world.customer, "Loop start", assignee=to_b)
    a = await mailbox(rt, world.team, world.admin, port=imap.port, folder="A", password=PASSWORD)
    b = await mailbox(
        rt, world.other_team, world.outsider, port=imap.port, folder="B", password=PASSWORD
    )
    folders = {"help-a@loop.test": "A", "help-b@loop.test": "B"}

    def relay(m: EmailMessage) -> list[tuple[str, bytes]]:
        folder = folders.get(str(m["To"]).lower())
        if folder is None:
            return []
        if relay_strips_headers:
            del m["Auto-Submitted"]
        return [(folder, m.as_bytes())]

    await conversation.post_message(rt, world.customer, ticket, "Anyone there?")
    assert await _loop(rt, smtp, imap, [a, b], relay) == 1  # one mail across, none back
    [got] = await q(rt, "SELECT outcome FROM inbound_mail WHERE mailbox_id = :b", b=b.id)
    # Our own Auto-Submitted: ignored; stripped by the relay, it opens a ticket, which mails
    # nobody (only replies are mailed), and A's Message-IDs never thread into B's tickets.
    assert got.outcome == ("ticket" if relay_strips_headers else "automatic")
    assert await q(rt, "SELECT id FROM inbound_mail WHERE mailbox_id = :b", b=a.id) == []


async def test_two_auto_responders_answering_through_a_ticket_are_stopped_by_the_loop_guard(
    mail_rt: Runtime, world: World, smtp: SmtpServer, imap: ImapServer
) -> None:
    """The customer and the assignee each have an auto-responder that strips Auto-Submitted and
    answers every mail in its thread: each answer is a reply that mails the other side."""
    rt = mail_rt
    rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 0})
    box = await mailbox(rt, world.team, world.admin, port=imap.port, password=PASSWORD)
    ticket = world.tickets["login"]  # Lin's, assigned to Chen
    responders = {"lin@acme.test", "chen@acme.test"}

    def respond(m: EmailMessage) -> list[tuple[str, bytes]]:
        who = str(m["To"]).lower()
        if who not in responders:
            return []
        answer = mail(who, f"Re: {m['Subject']}", "I am away.", f"<{uuid.uuid4()}@acme.test>",
                      In_Reply_To=str(m["Message-ID"]), References=str(m["Message-ID"]))  # fmt: skip
        return [("INBOX", answer)]

    await conversation.post_message(rt, world.staff, ticket, "Did that help?")
    delivered = await _loop(rt, smtp, imap, [box], respond)
    # Each responder's replies to the ticket beyond LOOP_REPLIES are marked automatic (and mail
    # nobody), so the loop ends after about 2 x LOOP_REPLIES answers.
    assert mail_gate.LOOP_REPLIES < delivered <= 2 * (mail_gate.LOOP_REPLIES + 1)
    rows = await q(rt, "SELECT sender, outcome, problem FROM inbound_mail WHERE mailbox_id = :b "
                   "ORDER BY id", b=box.id)  # fmt: skip
    assert rows[-1].outcome == "automatic" and "loop guard" in rows[-1].problem
    for who in responders:
        replies = [r for r in rows if r.sender == who and r.outcome == "reply"]
        assert len(replies) <= mail_gate.LOOP_REPLIES


@pytest.mark.slow
async def test_kill_9_mid_parse_of_replies_posts_each_reply_and_its_emails_once(
    rt: Runtime, world: World, settings: Settings, smtp: SmtpServer, imap: ImapServer,
    tmp_path: Path,
) -> None:  # fmt: skip
    """Replies take the conversation's post (its e-mails reserved in its transaction): killed
    mid-parse, each still becomes one message with one e-mail per recipient."""
    rt.clock = utcnow
    n = 150
    async with rt.engine.begin() as conn:  # n customers with a ticket each, replying by mail
        made = await conn.execute(sa.text(
            "WITH u AS (INSERT INTO app_user (email, display_name) SELECT 'r' || g || "
            " '@cust.test', 'R' || g FROM generate_series(1, :n) g RETURNING id, email), "
            "m AS (INSERT INTO membership (user_id, team_id, role) SELECT id, :t, 'CUSTOMER' "
            " FROM u) INSERT INTO ticket (team_id, title, status, priority, creator_id) "
            "SELECT :t, 'Reply drill', 'OPEN', 'NORMAL', id FROM u RETURNING id, "
            " (SELECT email FROM u WHERE u.id = creator_id) AS email"
        ), {"n": n, "t": world.team})  # fmt: skip
        tickets = {r.id: r.email for r in made}
    imap.append_many(
        [mail(e, f"Re: [#{t}] Reply drill", "Still broken.", f"<rd{t}@cust.test>")
         for t, e in tickets.items()]
    )  # fmt: skip
    box = await mailbox(rt, world.team, world.admin, port=imap.port, password=PASSWORD)

    async def replies() -> int:
        found = await q(rt, "SELECT count(*) AS c FROM inbound_mail WHERE outcome = 'reply'")
        return int(found[0].c)

    first = _worker(settings, tmp_path / "w1.log", smtp_url=smtp.url)
    try:
        await wait_for(lambda: _at_least(replies(), 1), timeout=60, what="the parse under way")
        first.kill()
        at_kill = await replies()
    finally:
        first.stop()
    second = _worker(settings, tmp_path / "w2.log", smtp_url=smtp.url)
    try:
        await wait_for(lambda: _at_least(replies(), n), timeout=120, what="every reply")
    finally:
        second.stop()
    assert at_kill < n, "the kill landed mid-parse"
    posted = await q(
        rt, "SELECT m.ticket_id, m.id, count(e.task_id) AS emails, "
        " count(DISTINCT e.recipient_id) AS recipients FROM ticket_message m "
        "LEFT JOIN message_email e ON e.message_id = m.id WHERE m.ticket_id = ANY(:t) "
        "GROUP BY m.ticket_id, m.id", t=list(tickets),
    )  # fmt: skip
    assert sorted(p.ticket_id for p in posted) == sorted(tickets)  # one message per ticket
    assert {(p.emails, p.recipients) for p in posted} == {(2, 2)}  # the team's admin and staff
    stored = await q(rt, "SELECT ticket_id FROM inbound_mail WHERE mailbox_id = :b", b=box.id)
    assert sorted(s.ticket_id for s in stored) == sorted(tickets)
