"""A team's mailboxes managed by its admins (desk/work/mailbox_admin.py, desk/work/mailbox_held.py;
docs/architecture.md, "Mail in"): every value checked with the field named, staff, customers and
outsiders answered exactly as for a missing team or mailbox, the password never in any view,
held mail accepted (the sender made a customer, the parse queued) or discarded once."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import sqlalchemy as sa

from desk.core.errors import NotFound, ValidationProblem
from desk.core.runtime import Runtime
from desk.work import mailbox_admin, mailbox_held, mailboxes
from tests.factories import World

SECRET = "pw-never-shown-9f3a"


def good(**over: Any) -> dict[str, Any]:
    return {
        "host": "imap.acme.test", "port": 993, "use_tls": True, "username": "help@acme.test",
        "password": SECRET, "folder": "INBOX", "cadence_seconds": 30, **over,
    }  # fmt: skip


async def test_an_admin_creates_lists_updates_and_deletes_a_mailbox(
    rt: Runtime, world: World
) -> None:
    box = await mailbox_admin.create_mailbox(rt, world.admin, world.team, good())
    assert (box.host, box.port, box.enabled, box.staff_only) == ("imap.acme.test", 993, True, False)
    assert SECRET not in repr(dataclasses.asdict(box))
    [listed] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    assert listed.id == box.id and listed.lag_seconds == 0.0 and listed.held_count == 0
    # A failed fetch says why, and is no fetch: the lag still counts from the last one that worked.
    await mailboxes.note_error(rt.pg, box.id, "refused")
    [failed] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    assert (failed.last_error, failed.last_fetch_at) == ("refused", None)
    changed = await mailbox_admin.update_mailbox(
        rt, world.admin, world.team, box.id, {"port": 143, "use_tls": False, "staff_only": True}
    )
    assert (changed.port, changed.use_tls, changed.staff_only) == (143, False, True)
    async with rt.engine.connect() as conn:
        enc = (await conn.execute(sa.text("SELECT password_enc FROM mailbox"))).scalar_one()
    assert SECRET.encode() not in bytes(enc)  # encrypted at rest; kept by an update without it
    await mailbox_admin.delete_mailbox(rt, world.admin, world.team, box.id)
    assert await mailbox_admin.list_mailboxes(rt, world.admin, world.team) == []


@pytest.mark.parametrize("who", ["staff", "customer", "outsider"])
async def test_anyone_but_an_admin_finds_no_team_and_no_mailbox(
    rt: Runtime, world: World, who: str
) -> None:
    box = await mailbox_admin.create_mailbox(rt, world.admin, world.team, good())
    user = getattr(world, who)
    calls = [
        mailbox_admin.list_mailboxes(rt, user, world.team),
        mailbox_admin.create_mailbox(rt, user, world.team, good()),
        mailbox_admin.update_mailbox(rt, user, world.team, box.id, {"port": 1}),
        mailbox_admin.delete_mailbox(rt, user, world.team, box.id),
        mailbox_admin.test_mailbox(rt, user, world.team, box.id),
        mailbox_held.list_held(rt, user, world.team),
    ]
    for call in calls:
        with pytest.raises(NotFound) as refused:
            await call
        assert refused.value.message == "Team not found."
    # ... the same as an admin asking for a team that does not exist
    with pytest.raises(NotFound) as missing:
        await mailbox_admin.list_mailboxes(rt, world.admin, 999_999)
    assert missing.value.message == "Team not found."
    # and another team's admin cannot reach this team's mailbox through their own team
    with pytest.raises(NotFound, match="Mailbox not found"):
        await mailbox_admin.update_mailbox(rt, world.outsider, world.other_team, box.id, {})


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"port": 0}, "port"),
        ({"port": 65536}, "port"),
        ({"port": "99x"}, "port"),
        ({"cadence_seconds": 4}, "cadence_seconds"),
        ({"host": "imap..acme"}, "host"),
        ({"host": "-bad.test"}, "host"),
        ({"host": "a b"}, "host"),
        ({"host": ""}, "host"),
        ({"host": "x\x00y"}, "host"),
        ({"username": ""}, "username"),
        ({"password": ""}, "password"),
        ({"folder": ""}, "folder"),
        ({"use_tls": "yes"}, "use_tls"),
        ({"colour": "red"}, "colour"),
        ({"host": mailbox_admin.DEV_HOST}, "host"),
    ],
)
async def test_bad_values_name_their_field(
    rt: Runtime, world: World, over: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationProblem) as bad:
        await mailbox_admin.create_mailbox(rt, world.admin, world.team, good(**over))
    assert bad.value.field == field
    assert SECRET not in bad.value.message


async def test_an_update_checks_too_and_ip_hosts_are_accepted(rt: Runtime, world: World) -> None:
    box = await mailbox_admin.create_mailbox(rt, world.admin, world.team, good(host="[::1]"))
    assert box.host == "::1"
    with pytest.raises(ValidationProblem) as bad:
        await mailbox_admin.update_mailbox(rt, world.admin, world.team, box.id, {"port": 70000})
    assert bad.value.field == "port"


async def _held_row(rt: Runtime, box_id: int, sender: str) -> int:
    raw = f"From: {sender}\r\nSubject: Let me in\r\nMessage-ID: <h1@x>\r\n\r\nHello\r\n".encode()
    async with rt.engine.begin() as conn:
        return int(
            (
                await conn.execute(
                    sa.text(
                        "INSERT INTO inbound_mail (mailbox_id, uidvalidity, uid, sender, raw, "
                        " received_at, parsed_at, outcome) VALUES (:b, 1, 1, :s, :r, now(), "
                        " now(), 'held') RETURNING id"
                    ),
                    {"b": box_id, "s": sender, "r": raw},
                )
            ).scalar_one()
        )


async def test_held_mail_is_accepted_once_making_the_sender_a_customer(
    rt: Runtime, world: World
) -> None:
    box = await mailbox_admin.create_mailbox(rt, world.admin, world.team, good(staff_only=True))
    row = await _held_row(rt, box.id, "stranger@else.test")
    [held] = await mailbox_held.list_held(rt, world.admin, world.team)
    assert (held.id, held.sender, held.subject) == (row, "stranger@else.test", "Let me in")
    [listed] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    assert listed.held_count == 1
    with pytest.raises(NotFound):  # the other team's admin: no such held message
        await mailbox_held.accept(rt, world.outsider, world.other_team, row)
    await mailbox_held.accept(rt, world.admin, world.team, row)
    with pytest.raises(NotFound, match="Held message not found"):
        await mailbox_held.accept(rt, world.admin, world.team, row)
    async with rt.engine.connect() as conn:
        parsed, outcome = (
            await conn.execute(sa.text("SELECT parsed_at, outcome FROM inbound_mail"))
        ).one()
        role = (
            await conn.execute(
                sa.text(
                    "SELECT m.role FROM membership m JOIN app_user u ON u.id = m.user_id "
                    "WHERE u.email = 'stranger@else.test' AND m.team_id = :t"
                ),
                {"t": world.team},
            )
        ).scalar_one()
        parses = (
            await conn.execute(
                sa.text(
                    "SELECT count(*) FROM background_task WHERE kind = 'MAIL_PARSE' "
                    "AND status = 'WAITING' AND scope_key = :s"
                ),
                {"s": f"mailbox:{box.id}"},
            )
        ).scalar_one()
    assert (parsed, outcome, role, parses) == (None, None, "CUSTOMER", 1)
    assert await mailbox_held.list_held(rt, world.admin, world.team) == []


async def test_held_mail_discarded_is_gone_from_the_list(rt: Runtime, world: World) -> None:
    box = await mailbox_admin.create_mailbox(rt, world.admin, world.team, good(staff_only=True))
    row = await _held_row(rt, box.id, "spam@else.test")
    await mailbox_held.discard(rt, world.admin, world.team, row)
    assert await mailbox_held.list_held(rt, world.admin, world.team) == []
    with pytest.raises(NotFound):
        await mailbox_held.discard(rt, world.admin, world.team, row)
