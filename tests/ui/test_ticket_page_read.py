"""The ticket page's one statement (desk/reads/ticket_page.py) against the reads it replaces,
on a thread with everything in it: notes, a note's file and a public one, a failed e-mail, a
redaction, history, a pending reminder and an earlier one — for staff and for the customer, who
never reads a note, its file or a delivery; and a ticket the reader may not see answers as a
missing one."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from desk.core.errors import NotFound
from desk.core.pg import Pg
from desk.helpdesk import tickets
from desk.reads import conversation, ticket_page
from desk.reads import tasks as task_reads
from desk.work import conversation as posting
from desk.work import opening, reminders
from tests.helpers import Upload
from ui.thread_view import WINDOW, read_thread

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _file(name: str) -> posting.IncomingFile:
    return posting.IncomingFile(name, Upload(PNG))


async def _sql(rt, statement: str, **params) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text(statement), params)


async def _busy_ticket(rt, world) -> int:
    """A ticket with a window's worth and more of messages, and every kind of part."""
    opened = await opening.open_ticket(rt, world.customer, world.team, "Printer", "Error 42.")
    ticket = opened.ticket.id
    assert ticket is not None
    for i in range(WINDOW):
        await posting.post_message(rt, world.staff, ticket, f"Reply {i}", internal=i % 9 == 0)
    await posting.post_message(rt, world.staff, ticket, "A note's screenshot", internal=True,
                               files=[_file("secret.png")])  # fmt: skip
    await posting.post_message(rt, world.customer, ticket, "My screenshot",
                               files=[_file("shot.png")])  # fmt: skip
    failed = await posting.post_message(rt, world.staff, ticket, "Undeliverable")
    await _sql(rt, "UPDATE background_task SET status = 'FAILED', last_error = '550 gone', "
                   "attempts = 8 WHERE id = ANY(:ids)", ids=failed.email_task_ids)  # fmt: skip
    redacted = await posting.post_message(rt, world.customer, ticket, "My password is hunter2")
    await posting.redact_message(rt, world.admin, redacted.message.id)
    await tickets.update_ticket(rt, world.staff, ticket, assignee_id=world.staff)
    await posting.post_message(rt, world.staff, ticket, "Pending now", set_status="PENDING")
    await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=30)
    await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=90)  # supersedes
    return ticket


async def test_the_statement_answers_as_the_reads_it_replaces(rt, world) -> None:
    ticket = await _busy_ticket(rt, world)
    for user in (world.staff, world.customer, world.admin):
        page = await ticket_page.read_page(rt.pg, user, ticket, first=WINDOW)
        old = await read_thread(rt, user, ticket, first=WINDOW)
        new = page.view
        assert new.ticket.model_dump() == old.ticket.model_dump()
        assert new.member == old.member and new.messages == old.messages
        assert new.history == old.history and new.deliveries == old.deliveries
        assert new.history and (new.messages.has_previous or not new.member.is_staff)
        assert {m: f for m, f in new.files.items() if f} == {
            m: f for m, f in old.files.items() if f
        }
        assert new.names.items() >= old.names.items()
        members = await tickets.team_members(rt, user, world.team)
        assert sorted(page.members) == sorted(members)
        if not new.member.is_staff:
            assert page.pending is None and page.reminders is None
            continue
        pending = await reminders.pending_reminder(rt, user, ticket)
        assert pending is not None and page.pending is not None
        assert page.pending == (await task_reads.task(rt.pg, user, pending.id)).task
        listed = await task_reads.list_tasks(
            rt.pg, user, world.team, kind="REMINDER", ticket_id=ticket,
            first=ticket_page.REMINDERS_SHOWN + 1,
        )  # fmt: skip
        assert page.reminders == listed and len(listed.items) == 2


async def test_values_come_back_as_a_plain_row_reads_them(rt, world) -> None:
    """JSON has no timestamps and writes 0.0 as 0: the decoded rows have psycopg's types."""
    ticket = await _busy_ticket(rt, world)
    page = await ticket_page.read_page(rt.pg, world.staff, ticket, first=WINDOW)
    message = page.view.messages.items[-1]
    assert isinstance(message.created_at, datetime) and message.created_at.tzinfo is not None
    assert page.reminders is not None
    for row in page.reminders.items:
        assert type(row.progress) is float and isinstance(row.run_at, datetime)
        assert isinstance(row.filters, dict)


async def test_a_customer_never_reads_a_note_its_file_or_a_delivery(rt, world) -> None:
    ticket = await _busy_ticket(rt, world)
    staff = (await ticket_page.read_page(rt.pg, world.staff, ticket, first=WINDOW)).view
    customer = (await ticket_page.read_page(rt.pg, world.customer, ticket, first=WINDOW)).view
    assert any(m.internal for m in staff.messages.items)
    assert any(d.state == "failed" for ds in staff.deliveries.values() for d in ds)
    assert {a.filename for fs in staff.files.values() for a in fs} == {"secret.png", "shot.png"}
    assert not any(m.internal for m in customer.messages.items)
    assert customer.deliveries == {}
    assert {a.filename for fs in customer.files.values() for a in fs} == {"shot.png"}
    assert "A note's screenshot" not in {m.body for m in customer.messages.items}


async def test_a_ticket_not_theirs_answers_as_a_missing_one(rt, world) -> None:
    ticket = await _busy_ticket(rt, world)
    cases = [
        (world.staff, 10**9),  # no such ticket
        (world.staff, world.tickets["globex"]),  # another team's
        (world.outsider, ticket),  # an admin of another team
        (world.customer2, ticket),  # a customer of the team, not theirs
    ]
    answers = []
    for user, ticket_id in cases:
        with pytest.raises(NotFound) as caught:
            await ticket_page.read_page(rt.pg, user, ticket_id, first=WINDOW)
        answers.append((type(caught.value), str(caught.value)))
    assert len(set(answers)) == 1
    with pytest.raises(NotFound):
        await conversation.read_thread(rt, world.customer2, ticket)


async def test_the_page_of_a_ticket_not_theirs_is_the_page_of_a_missing_one(
    page_as, world, rt
) -> None:
    ticket = await _busy_ticket(rt, world)
    for user in (world.customer2, world.outsider):
        reader = await page_as(user)
        foreign = await reader.get(f"/tickets/{ticket}")
        missing = await reader.get(f"/tickets/{10**9}")
        assert foreign.status_code == missing.status_code == 404
        path = f"/tickets/{ticket}", f"/tickets/{10**9}"
        assert foreign.text.replace(path[0], "/N") == missing.text.replace(path[1], "/N")


async def test_a_refused_post_shows_the_page_as_it_opens(page_as, world, rt) -> None:
    """Without htmx a refused reply answers the whole page, read as the page reads it."""
    ticket = await _busy_ticket(rt, world)
    staff = await page_as(world.staff)
    refused = await staff.post(
        f"/tickets/{ticket}/messages", data={"body": " ", "csrf_token": staff.csrf}
    )
    assert refused.status_code == 422
    page = (await staff.get(f"/tickets/{ticket}")).text
    for part in ('id="ticket-fields"', 'id="reminders"', "Undeliverable", "Retry sending"):
        assert part in refused.text and part in page


async def test_the_page_reads_its_session_in_the_same_statement(page_as, world, rt) -> None:
    """No session read before the page: a revoked session is refused on the next load, and a
    malformed id's "not found" still shows who is signed in."""
    ticket = await _busy_ticket(rt, world)
    staff = await page_as(world.staff)
    assert (await staff.get(f"/tickets/{ticket}")).status_code == 200
    malformed = await staff.get("/tickets/abc")
    assert malformed.status_code == 404 and "Sign out" in malformed.text
    await _sql(rt, "UPDATE web_session SET revoked_at = now() WHERE user_id = :u", u=world.staff)
    refused = await staff.get(f"/tickets/{ticket}")
    assert refused.status_code == 303
    assert refused.headers["location"] == f"/login?next=/tickets/{ticket}"


async def test_the_page_settles_on_its_generic_plan(rt, world) -> None:
    """The page's read leaves the plan to PostgreSQL: after a connection's first loads the statement
    is prepared and runs on its generic plan, not planned afresh for every page (planning it
    costs more than running it). A change that made the generic plan look dearer than the
    custom ones would keep every load planning: this says so."""
    pg = Pg(rt.settings, max_size=1)
    await pg.open()
    try:
        for _ in range(15):
            page = await ticket_page.read_page(
                pg, world.staff, world.tickets["login"], first=WINDOW
            )
            assert page.view.ticket.id == world.tickets["login"]
        plans = await pg.all(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement LIKE 'WITH r AS%%'"
        )
    finally:
        await pg.close()
    assert len(plans) == 1 and plans[0]["generic_plans"] >= 3, plans
