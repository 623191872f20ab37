""" "Test connection" against a real IMAP server process (tests/imap_server.py's Dovecot):
it works; a wrong password is a rejected login; a missing folder is named; a closed port is
refused; TLS spoken to a plain port is a failed handshake; a name that does not resolve is DNS;
a server that never greets is a timeout — and the password is in none of the answers.
(desk/work/mailbox_check.py; docs/architecture.md, "Mail in")"""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from desk.core.runtime import Runtime
from desk.work import mailbox_admin, mailbox_check
from desk.work.mailbox_check import Target
from tests.factories import World
from tests.imap_server import PASSWORD, USER, ImapServer, available


@pytest.fixture
def imap() -> Iterator[ImapServer]:
    why = available()
    if why:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="taskdesk-imap-"))  # as root, Dovecot must reach it
    server = ImapServer(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_each_failure_is_named(imap: ImapServer) -> None:
    def at(**over: object) -> Target:
        base = {"host": imap.host, "port": imap.port, "use_tls": False, "username": USER,
                "folder": "INBOX"}  # fmt: skip
        return Target(**{**base, **over})  # type: ignore[arg-type]

    cases = [
        (at(), PASSWORD, mailbox_check.OK),
        (at(), "wrong-password-77", mailbox_check.LOGIN),
        (at(folder="Nowhere"), PASSWORD, mailbox_check.FOLDER),
        (at(port=_closed_port()), PASSWORD, mailbox_check.REFUSED),
        (at(use_tls=True), PASSWORD, mailbox_check.TLS),
        (at(host="no-such-host.invalid"), PASSWORD, mailbox_check.DNS),
    ]
    for target, password, step in cases:
        got = await mailbox_check.check(target, password)
        assert (got.step, got.ok) == (step, step == mailbox_check.OK), got
        assert password not in got.message and PASSWORD not in got.message
    missing = await mailbox_check.check(at(folder="Nowhere"), PASSWORD)
    assert "'Nowhere'" in missing.message


async def test_a_silent_server_is_a_timeout_within_the_deadline() -> None:
    done = asyncio.Event()

    async def mute(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await done.wait()  # accepts, never greets, until the test is over

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        got = await mailbox_check.check(
            Target("127.0.0.1", port, False, USER, "INBOX"), PASSWORD, seconds=1.0
        )
        assert got.step == mailbox_check.TIMEOUT_STEP
        assert loop.time() - started < 5
    finally:
        done.set()
        server.close()


async def test_an_admin_tests_a_stored_mailbox_and_unsaved_values(
    rt: Runtime, world: World, imap: ImapServer
) -> None:
    box = await mailbox_admin.create_mailbox(
        rt, world.admin, world.team,
        {"host": imap.host, "port": imap.port, "use_tls": False, "username": USER,
         "password": PASSWORD},
    )  # fmt: skip
    stored = await mailbox_admin.test_mailbox(rt, world.admin, world.team, box.id)
    assert stored.ok, stored
    override = await mailbox_admin.test_mailbox(
        rt, world.admin, world.team, box.id, {"folder": "Archive", "password": ""}
    )
    assert override.step == mailbox_check.FOLDER  # the stored password, the form's folder
    fresh = await mailbox_admin.test_mailbox(
        rt, world.admin, world.team, None,
        {"host": imap.host, "port": imap.port, "use_tls": False, "username": USER,
         "password": "nope-123"},
    )  # fmt: skip
    assert fresh.step == mailbox_check.LOGIN
