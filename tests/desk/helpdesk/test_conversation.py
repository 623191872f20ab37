"""The conversation's rules: replies and notes, who hears of them, status and history, files."""

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.errors import NotAllowed, NotFound, TooLarge, ValidationProblem
from desk.helpdesk import tickets
from desk.ledger import lanes
from desk.ledger import mail as ledger_mail
from desk.ledger import sends as ledger_sends
from desk.reads import conversation as reads
from desk.work import conversation, mail
from tests.helpers import Upload


async def _emails(rt):
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT t.id, t.filters, t.owner_id, t.ticket_id, e.message_id FROM background_task t "
                "LEFT JOIN message_email e ON e.task_id = t.id WHERE t.kind = 'EMAIL' ORDER BY t.id"
            )
        )
        return rows.all()


async def test_staff_reply_mails_the_customer_threaded(rt, world):
    ticket = world.tickets["login"]
    first = await conversation.post_message(rt, world.customer, ticket, "It still fails")
    reply = await conversation.post_message(
        rt, world.staff, ticket, "Try again now", set_status="PENDING"
    )
    assert reply.ticket.status == "PENDING"
    assert [(c.field, c.old_value, c.new_value) for c in reply.changes] == [
        ("status", "OPEN", "PENDING")
    ]
    mails = await _emails(rt)
    # The customer's message went to the assignee (Chen), the reply to the customer (Lin).
    assert [(m.owner_id, m.message_id) for m in mails] == [
        (world.staff, first.message.id),
        (world.customer, reply.message.id),
    ]
    msg = mail.build_message(
        mails[1].id, mails[1].filters, rt.clock(), mail_from="desk@x.test",
        public_url="http://desk.test",
    )  # fmt: skip
    assert msg["Message-ID"] == f"<taskdesk-ticket-{ticket}-{reply.message.id}@desk.test>"
    assert msg["In-Reply-To"] == f"<taskdesk-ticket-{ticket}-{first.message.id}@desk.test>"
    assert f"[#{ticket}]" in msg["Subject"] and msg["Subject"].startswith("Re: ")
    assert "Try again now" in msg.get_body(("plain",)).get_content()


async def test_customer_reply_reopens_a_resolved_ticket(rt, world):
    posted = await conversation.post_message(rt, world.customer, world.tickets["resolved"], "Back")
    assert posted.ticket.status == "OPEN"
    page = await reads.history(rt, world.staff, world.tickets["resolved"])
    assert [(c.field, c.new_value, c.actor_id) for c in page.items] == [
        ("status", "OPEN", world.customer)
    ]


async def test_a_note_is_to_a_customer_as_missing(rt, world):
    ticket = world.tickets["login"]
    note = await conversation.post_message(rt, world.staff, ticket, "secret", internal=True)
    assert note.email_task_ids == []
    staff_view = await reads.read_thread(rt, world.staff, ticket)
    customer_view = await reads.read_thread(rt, world.customer, ticket)
    assert [m.body for m in staff_view.messages.items] == ["secret"]
    assert customer_view.messages.items == []
    async with rt.engine.connect() as conn:
        with pytest.raises(NotFound) as missing_note:
            await reads.visible_message(conn, world.customer, note.message.id)
        with pytest.raises(NotFound) as missing:
            await reads.visible_message(conn, world.customer, note.message.id + 1000)
    assert str(missing_note.value) == str(missing.value)
    with pytest.raises(NotAllowed):
        await conversation.post_message(rt, world.customer, ticket, "x", internal=True)


async def test_who_may_reply(rt, world):
    with pytest.raises(NotFound):  # another customer's ticket
        await conversation.post_message(rt, world.customer2, world.tickets["login"], "hi")
    with pytest.raises(NotFound):  # another team's
        await conversation.post_message(rt, world.outsider, world.tickets["login"], "hi")
    with pytest.raises(ValidationProblem):
        await conversation.post_message(rt, world.customer, world.tickets["login"], "  \n ")
    with pytest.raises(ValidationProblem):
        await conversation.post_message(rt, world.customer, world.tickets["login"], "a\x00b")


async def test_files_round_trip_and_caps(rt, world):
    ticket = world.tickets["login"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3000
    files = [conversation.IncomingFile("../../etc/shot\u202egnp.png", Upload(png))]
    posted = await conversation.post_message(rt, world.customer, ticket, "", files=files)
    (a,) = posted.attachments
    assert (a.filename, a.content_type, a.size) == ("shotgnp.png", "image/png", len(png))
    got = await reads.open_attachment(rt, world.staff, a.id)
    assert b"".join([c async for c in got.chunks]) == png
    with pytest.raises(NotFound):
        await reads.open_attachment(rt, world.customer2, a.id)
    rt.settings.attachment_max_bytes = 1024
    with pytest.raises(TooLarge):
        await conversation.post_message(
            rt, world.customer, ticket, "big", files=[conversation.IncomingFile("b", Upload(png))]
        )
    view = await reads.read_thread(rt, world.staff, ticket)
    assert [m.body for m in view.messages.items] == [""], "the refused message left nothing"


async def test_admin_redacts(rt, world):
    ticket = world.tickets["login"]
    posted = await conversation.post_message(rt, world.customer, ticket, "my password is x")
    with pytest.raises(NotAllowed):
        await conversation.redact_message(rt, world.staff, posted.message.id)
    done = await conversation.redact_message(rt, world.admin, posted.message.id)
    assert done.body == "" and done.redacted_by == world.admin
    t = await tickets.get_ticket(rt, world.admin, ticket)
    assert t.message_count == 1 and t.last_public_reply_at is not None


async def test_unassigned_replies_go_to_staff_who_want_them(rt, world):
    from desk.people import preferences

    await preferences.set_mine(rt, world.admin, ticket_reply_email=False)
    posted = await conversation.post_message(rt, world.customer2, world.tickets["printer"], "Help")
    mails = await _emails(rt)
    assert [m.owner_id for m in mails] == [world.staff], "Zhou turned it off; Chen did not"
    assert posted.email_task_ids == [mails[0].id]
    note = await conversation.post_message(
        rt, world.staff, world.tickets["printer"], "looking", internal=True
    )
    assert note.email_task_ids == [] and len(await _emails(rt)) == 1, "notes are never mailed"


async def _sends(rt, task_ids):
    """(sends, reserved) of each task, as the ledger has them."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT sends, dispatched_at IS NOT NULL AS reserved FROM background_task "
                "WHERE id = ANY(:ids) ORDER BY id"
            ),
            {"ids": task_ids},
        )
        return [tuple(r) for r in rows]


async def test_a_reply_is_in_redis_when_the_post_returns(rt, world):
    posted = await conversation.post_message(rt, world.staff, world.tickets["login"], "Done")
    assert posted.email_task_ids and len(posted.sends) == len(posted.email_task_ids)
    assert await _sends(rt, posted.email_task_ids) == [(1, True)]
    assert await rt.queue.held([d.message() for d in posted.sends]) == [True]


async def test_a_reply_waits_for_the_dispatcher_when_its_team_window_is_full(rt, world):
    window = rt.settings.team_mail_max_queued
    for i in range(window):  # the team's window of queued e-mails, full
        await ledger_mail.accept_email(
            rt.pg, team_id=world.team, owner_id=None, scope_key=f"storm:{i}",
            filters={"to": f"s{i}@x.test"}, max_attempts=5, now=rt.clock(),
        )  # fmt: skip
    due = await ledger_sends.claim_due(
        rt.pg, now=rt.clock(), lookahead=timedelta(minutes=1), redelivery=timedelta(minutes=1),
        limit=1000, team_max=2, mail_max=window,
    )  # fmt: skip
    assert len(due) == window
    posted = await conversation.post_message(rt, world.staff, world.tickets["login"], "Later")
    assert posted.sends == [] and await _sends(rt, posted.email_task_ids) == [(0, False)]


async def test_a_reply_waits_while_the_short_lane_is_paused(rt, world):
    await lanes.pause(rt, lanes.SHORT, None)
    posted = await conversation.post_message(rt, world.staff, world.tickets["login"], "Paused")
    assert posted.sends == [] and await _sends(rt, posted.email_task_ids) == [(0, False)]
    await lanes.resume(rt, lanes.SHORT)
    again = await conversation.post_message(rt, world.staff, world.tickets["login"], "Resumed")
    assert await _sends(rt, again.email_task_ids) == [(1, True)]


async def test_a_post_over_a_cap_leaves_no_message_and_no_email(rt, world):
    ticket = world.tickets["login"]
    before = await _emails(rt)
    with pytest.raises(TooLarge):
        files = [
            conversation.IncomingFile(
                "big.bin", Upload(b"x" * (rt.settings.attachment_max_bytes + 1))
            )
        ]
        await conversation.post_message(rt, world.customer, ticket, "huge", files=files)
    assert await _emails(rt) == before
    staff_view = await reads.read_thread(rt, world.staff, ticket)
    assert "huge" not in [m.body for m in staff_view.messages.items]
