"""Drills of mail in with real processes (issue 42; docs/architecture.md, "Mail in"): a real
Dovecot (tests/imap_server.py) behind a TCP proxy that slows or cuts the connection, real worker
processes killed with SIGKILL, a private PostgreSQL stopped and started mid-batch. Each ends with
every message stored once and made into exactly one ticket (counted by Message-ID). The
kill -9 mid-parse drill is tests/mail/test_mailboxes.py's."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from desk.work import mail_parse, mailboxes
from desk.work.mailboxes import Mailbox
from jobs.execution import execute
from jobs.processors import registry
from taskdesk import migrate
from taskdesk.embedded import PostgresServer
from tests.factories import World, make_world
from tests.helpers import WorkerProcess, wait_for, wait_until
from tests.imap_server import PASSWORD, USER, ImapServer, Proxy, available, running
from tests.mail.inbound_helpers import mail, q


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
