"""Onboarding's e-mails through a real SMTP server process: an invitation and a password reset
are queued in the transaction that writes their link, sent in the reader's language, and the
e-mailed link is the one that works (desk/work/onboarding.py)."""

from __future__ import annotations

import re

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.people import invitations, resets
from desk.work import onboarding
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.smtp_server import SmtpServer


async def _email_tasks(rt: Runtime) -> list[sa.Row[tuple[object, ...]]]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT id, run FROM background_task WHERE kind = 'EMAIL' ORDER BY id")
        return list((await conn.execute(q)).all())


async def _send_all(rt: Runtime) -> None:
    for row in await _email_tasks(rt):
        assert await execute(rt, registry(), int(row.id), int(row.run)) is not None


def _link(body: str, path: str) -> str:
    found = re.search(r"https://desk\.acme\.test" + path + r"([A-Za-z0-9_\-]+)", body)
    assert found, body
    return found.group(1)


async def test_an_invitation_is_emailed_with_the_link_that_works(
    mail_rt: Runtime, world: World, smtp: SmtpServer
) -> None:
    rt = mail_rt
    new = await onboarding.invite_member(rt, world.admin, world.team, "Dana@Example.test", "STAFF")
    await _send_all(rt)
    [msg] = smtp.messages()
    assert msg["To"].lower() == "dana@example.test"
    text = msg.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    token = _link(text, "/invitations/")
    assert token == new.token, "the e-mailed link is the one shown to the admin"
    assert "Admin invited you to join the team Acme" in text
    accepted = await invitations.accept(
        rt, token, display_name="Dana", password="a long enough password", user_id=None
    )
    assert accepted.role.value == "STAFF" and accepted.new_account


async def test_a_reset_is_emailed_only_to_an_account_and_its_link_works(
    mail_rt: Runtime, world: World, smtp: SmtpServer
) -> None:
    rt = mail_rt
    await onboarding.request_password_reset(rt, "nobody@acme.test", "1.2.3.4")
    assert await _email_tasks(rt) == [], "no account, no message (the answer is the same)"
    await onboarding.request_password_reset(rt, "chen@acme.test", "1.2.3.4")
    await _send_all(rt)
    [msg] = smtp.messages()
    assert msg["To"] == "chen@acme.test"
    token = _link(msg.get_body(("plain",)).get_content(), "/password/reset/")  # type: ignore[union-attr]
    done = await resets.reset(rt, token, "another long password")
    assert done is not None
