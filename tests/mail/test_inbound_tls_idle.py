"""Fetching over verified TLS and waiting in IMAP IDLE, against a real Dovecot
(tests/imap_server.py; docs/architecture.md, "Mail in"): a server whose certificate no trusted
CA signed is refused — by "test connection" with the `tls` step, by a fetch with the error
noted on the mailbox — until MAIL_CA_FILE names its CA; a message appended while a fetch waits
in IDLE is stored at once, not a cadence later; a connection dropped in IDLE is noted on the mailbox and
the next fetch goes on (and clears it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.work import mailbox_check, mailboxes
from desk.work.mailboxes import Mailbox
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.helpers import PATIENCE, wait_for
from tests.imap_server import PASSWORD, USER, ImapServer, Proxy, available, running
from tests.mail.inbound_helpers import mail, q


@pytest.fixture
def tls_imap() -> Iterator[ImapServer]:
    why = available()
    if why:
        pytest.skip(why)
    with running(tls=True) as server:
        yield server


async def _mailbox(rt: Runtime, world: World, port: int, *, tls: bool, cadence: int) -> Mailbox:
    async with rt.engine.begin() as conn:
        return await mailboxes.create(
            conn, rt.settings, team_id=world.team, created_by_id=world.admin, host="127.0.0.1",
            port=port, use_tls=tls, username=USER, password=PASSWORD, cadence_seconds=cadence,
            now=rt.clock(),
        )  # fmt: skip


async def _waiting_fetch(rt: Runtime) -> Any:
    [task] = await q(
        rt, "SELECT id, run, run_at FROM background_task WHERE kind = 'MAIL_FETCH' "
        "AND status = 'WAITING'",
    )  # fmt: skip
    return task


async def _fetch(rt: Runtime) -> str:
    task = await _waiting_fetch(rt)
    return await execute(rt, registry(), task.id, task.run)


async def test_an_untrusted_certificate_is_refused_until_mail_ca_file_names_its_ca(
    rt: Runtime, world: World, tls_imap: ImapServer
) -> None:
    rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 0})
    tls_imap.append(mail("ann@cust.test", "Over TLS", "Hello.", "<tls1@cust.test>"))
    target = mailbox_check.Target("127.0.0.1", tls_imap.tls_port, True, USER, "INBOX")
    said = await mailbox_check.check(target, PASSWORD)
    assert (said.ok, said.step) == (False, mailbox_check.TLS), said
    box = await _mailbox(rt, world, tls_imap.tls_port, tls=True, cadence=30)
    assert await _fetch(rt) == "retry"
    [mb] = await q(rt, "SELECT last_error, last_uid FROM mailbox WHERE id = :b", b=box.id)
    assert "not trusted" in mb.last_error and "MAIL_CA_FILE" in mb.last_error
    assert mb.last_uid == 0 and await q(rt, "SELECT id FROM inbound_mail") == []

    rt.settings = rt.settings.model_copy(update={"mail_ca_file": tls_imap.ca_file})
    said = await mailbox_check.check(target, PASSWORD, ca_file=tls_imap.ca_file)
    assert (said.ok, said.step) == (True, mailbox_check.OK), said
    async with rt.engine.begin() as conn:  # the retry due now instead of after its backoff
        await conn.execute(sa.text("UPDATE background_task SET run_at = :now "
                                   "WHERE kind = 'MAIL_FETCH'"), {"now": rt.clock()})  # fmt: skip
    assert await _fetch(rt) == "done"
    stored = await q(rt, "SELECT message_id FROM inbound_mail")
    assert [s.message_id for s in stored] == ["<tls1@cust.test>"]
    [mb] = await q(rt, "SELECT last_error FROM mailbox WHERE id = :b", b=box.id)
    assert mb.last_error is None


async def test_the_plain_port_of_a_tls_server_is_not_taken_for_tls(
    rt: Runtime, tls_imap: ImapServer
) -> None:
    # TLS asked of a port that speaks plain IMAP: the handshake fails, nothing is sent in clear.
    target = mailbox_check.Target("127.0.0.1", tls_imap.port, True, USER, "INBOX")
    said = await mailbox_check.check(target, PASSWORD, ca_file=tls_imap.ca_file)
    assert not said.ok and said.step in (mailbox_check.TLS, mailbox_check.PROTOCOL), said


@pytest.fixture
def imap() -> Iterator[ImapServer]:
    why = available()
    if why:
        pytest.skip(why)
    with running() as server:
        yield server


async def test_idle_stores_an_appended_message_at_once_not_a_cadence_later(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    idle = 15.0
    rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": idle})
    box = await _mailbox(rt, world, imap.port, tls=False, cadence=3600)
    task = await _waiting_fetch(rt)
    job = asyncio.create_task(execute(rt, registry(), task.id, task.run))
    try:

        async def first_pass() -> bool:
            found = await q(rt, "SELECT last_fetch_at FROM mailbox WHERE id = :b", b=box.id)
            return found[0].last_fetch_at is not None

        await wait_for(first_pass, timeout=30, what="the fetch's first pass")
        # Appended by another client while the fetch waits in IDLE (blocking this loop a moment:
        # the server's announcement waits in the fetch's socket).
        appended = time.monotonic()
        imap.append(mail("bo@cust.test", "Pushed", "By IDLE.", "<idle1@cust.test>"))

        async def stored() -> bool:
            return bool(await q(rt, "SELECT id FROM inbound_mail WHERE mailbox_id = :b", b=box.id))

        await wait_for(stored, timeout=idle / PATIENCE / 2, interval=0.02, what="the pushed mail")
        took = time.monotonic() - appended
        assert not job.done(), "stored while the fetch still waited in IDLE, not by a new fetch"
        assert took < idle / 2, f"stored {took:.1f} s after the append"
        assert await asyncio.wait_for(job, timeout=idle + 60) == "done"
    finally:
        job.cancel()
    # It waited in IDLE, so its next fetch is due at once, not a cadence (an hour) later.
    nxt = await _waiting_fetch(rt)
    assert nxt.run_at == rt.clock()
    parse = await q(rt, "SELECT id FROM background_task WHERE kind = 'MAIL_PARSE'")
    assert len(parse) == 1


async def test_a_connection_dropped_in_idle_is_noted_and_the_next_fetch_goes_on(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    proxy = Proxy(imap.port)
    try:
        rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 30.0})
        box = await _mailbox(rt, world, proxy.port, tls=False, cadence=3600)
        task = await _waiting_fetch(rt)
        job = asyncio.create_task(execute(rt, registry(), task.id, task.run))

        async def first_pass() -> bool:
            found = await q(rt, "SELECT last_fetch_at FROM mailbox WHERE id = :b", b=box.id)
            return found[0].last_fetch_at is not None

        await wait_for(first_pass, timeout=30, what="the fetch's first pass")
        proxy.drop_all()  # the server restarts while the fetch waits in IDLE
        assert await asyncio.wait_for(job, timeout=60) == "retry"
        [mb] = await q(rt, "SELECT last_error FROM mailbox WHERE id = :b", b=box.id)
        assert "closed the connection" in mb.last_error
        imap.append(mail("cy@cust.test", "After the drop", "Hi.", "<drop1@cust.test>"))
        rt.settings = rt.settings.model_copy(update={"mail_idle_seconds": 0})
        async with rt.engine.begin() as conn:  # the retry due now instead of after its backoff
            await conn.execute(sa.text("UPDATE background_task SET run_at = :now "
                                       "WHERE kind = 'MAIL_FETCH'"), {"now": rt.clock()})  # fmt: skip
        assert await _fetch(rt) == "done"
        [mb] = await q(rt, "SELECT last_error FROM mailbox WHERE id = :b", b=box.id)
        assert mb.last_error is None
        stored = await q(rt, "SELECT message_id FROM inbound_mail WHERE mailbox_id = :b", b=box.id)
        assert [s.message_id for s in stored] == ["<drop1@cust.test>"]
    finally:
        proxy.close()
