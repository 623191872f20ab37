"""The ticket list's "N tickets match" (issue 11): above desk.helpdesk.tickets.COUNT_CAP it says "N+"."""

from __future__ import annotations

from desk.helpdesk import tickets
from tests.factories import add_ticket


async def test_a_count_above_the_cap_shows_a_plus(page_as, world, rt, monkeypatch) -> None:
    for i in range(3):
        await add_ticket(rt, world.team, world.customer, f"退款 {i}")
    monkeypatch.setattr(tickets, "COUNT_CAP", 2)
    page = await page_as(world.staff)
    r = await page.get("/tickets?q=退款")
    assert "2+ tickets match" in r.text and "showing 1\u20133" in r.text
    r = await page.hx_get("/tickets?q=退款 2")
    assert "1 ticket matches" in r.text and "+ tickets match" not in r.text
    mine = await page_as(world.customer2)
    r = await mine.get("/tickets?q=退款")
    assert "No tickets match these filters." in r.text
