"""The ticket page's fast path: its reads in one round trip (desk/reads/ticket_page.py) answer
what the reads they replace answer, and the remembered message markup (ui/thread_cache.py) is
never stale and never someone else's — a redaction, a delivery's new state or a renamed author
shows on the next load, and a customer never gets a note, staff's delivery lines or another
session's CSRF token from what staff's loads left behind."""

from __future__ import annotations

import re

import sqlalchemy as sa

from desk.reads import conversation, ticket_page
from desk.work import conversation as posting
from desk.work import opening
from ui import thread_cache
from ui.thread_view import WINDOW


async def _ticket(rt, world) -> int:
    opened = await opening.open_ticket(rt, world.customer, world.team, "Printer", "Error 42.")
    assert opened.ticket.id is not None
    return opened.ticket.id


async def _sql(rt, statement: str, **params) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text(statement), params)


def _csrf(html: str) -> set[str]:
    return set(re.findall(r'name="csrf_token" value="([^"]+)"', html))


async def test_the_one_round_trip_read_answers_as_read_thread(rt, world) -> None:
    ticket = await _ticket(rt, world)
    for i in range(WINDOW + 5):
        await posting.post_message(rt, world.staff, ticket, f"Reply {i}", internal=i % 7 == 0)
    await posting.post_message(rt, world.staff, ticket, "Pending now", set_status="PENDING")
    for user in (world.staff, world.customer):
        old = await conversation.read_thread(rt, user, ticket, first=WINDOW)
        new = (await ticket_page.read_page(rt.pg, user, ticket, first=WINDOW)).view
        assert new.ticket.model_dump() == old.ticket.model_dump()
        assert new.member == old.member and new.messages == old.messages
        assert new.history == old.history and new.deliveries == old.deliveries
        assert {m: f for m, f in new.files.items() if f} == {
            m: f for m, f in old.files.items() if f
        }
        assert new.names.items() >= old.names.items()


async def test_a_customer_never_gets_what_staff_left_in_the_memo(page_as, world, rt) -> None:
    thread_cache.clear()
    ticket = await _ticket(rt, world)
    await posting.post_message(rt, world.staff, ticket, "Public answer")
    await posting.post_message(rt, world.staff, ticket, "Secret note", internal=True)
    staff_page = (await (await page_as(world.staff)).get(f"/tickets/{ticket}")).text
    assert "Secret note" in staff_page and 'class="delivery"' in staff_page
    customer_page = (await (await page_as(world.customer)).get(f"/tickets/{ticket}")).text
    assert "Public answer" in customer_page
    assert "Secret note" not in customer_page and 'class="delivery"' not in customer_page
    assert not _csrf(staff_page) & _csrf(customer_page)


async def test_a_change_shows_on_the_next_load(page_as, world, rt) -> None:
    thread_cache.clear()
    ticket = await _ticket(rt, world)
    posted = await posting.post_message(rt, world.staff, ticket, "My password is hunter2")
    staff = await page_as(world.staff)
    first = (await staff.get(f"/tickets/{ticket}")).text
    assert "hunter2" in first and "Retry sending" not in first
    await _sql(rt, "UPDATE background_task SET status = 'FAILED', last_error = '550 gone' "
                   "WHERE id = ANY(:ids)", ids=posted.email_task_ids)  # fmt: skip
    await _sql(rt, "UPDATE app_user SET display_name = 'Renamed Staff' WHERE id = :u",
               u=world.staff)  # fmt: skip
    second = (await staff.get(f"/tickets/{ticket}")).text
    assert "Retry sending" in second and "550 gone" in second
    assert '<strong class="author">Renamed Staff</strong>' in second
    r = await (await page_as(world.admin)).hx_post(
        f"/tickets/{ticket}/messages/{posted.message.id}/redact"
    )
    assert r.status_code == 200
    third = (await staff.get(f"/tickets/{ticket}")).text
    assert "hunter2" not in third and "Redacted by" in third


async def test_remembered_markup_is_the_rendered_markup(page_as, world, rt, monkeypatch) -> None:
    ticket = await _ticket(rt, world)
    await posting.post_message(rt, world.staff, ticket, "See https://example.com/a.\n> quoted")
    staff = await page_as(world.staff)
    thread_cache.clear()
    missed = (await staff.get(f"/tickets/{ticket}")).text
    hit = (await staff.get(f"/tickets/{ticket}")).text
    monkeypatch.setattr(thread_cache, "remembered", lambda _key, render: render())
    plain = (await staff.get(f"/tickets/{ticket}")).text
    ids = re.compile(r'data-at="\d+"|name="key" value="\w+"|name="idempotency_key" value="\w+"')
    assert ids.sub("", missed) == ids.sub("", hit) == ids.sub("", plain)
