"""The SLA on the pages: the ticket list's Due column ("due in 42 min", "breached 3 h ago", the
instant in a <time>) and SLA filter for staff, neither for customers; the ticket page's line;
Chinese words; an export from the filtered list carries the filter. Relative words are worked
out at render, at the request's clock (the tests move it)."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa

from desk.reads import tasks as reads


async def _set_sla(rt, ticket_id: int, due: datetime | None, breached: datetime | None) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET sla_due_at = :d, sla_breached_at = :b WHERE id = :id"),
            {"d": due, "b": breached, "id": ticket_id},
        )


async def _scene(rt, world, clock) -> None:
    now = clock()
    await _set_sla(rt, world.tickets["login"], now + timedelta(minutes=42), None)
    await _set_sla(rt, world.tickets["printer"], None, now - timedelta(hours=3))
    await _set_sla(rt, world.tickets["formula"], now + timedelta(hours=5), None)


async def test_staff_see_the_due_column(page_as, rt, world, clock) -> None:
    await _scene(rt, world, clock)
    page = await page_as(world.staff)
    r = await page.get("/tickets")
    assert r.status_code == 200
    assert '<th scope="col">Due</th>' in r.text
    assert "due in 42 min" in r.text
    assert "breached 3 h ago" in r.text
    assert "due in 5 h" in r.text
    due = (clock() + timedelta(minutes=42)).isoformat()
    assert f'datetime="{due}"' in r.text  # the instant itself, for a page left open
    assert 'data-sla="NONE"' in r.text  # the resolved ticket: no clock
    assert 'name="sla"' in r.text
    # Words at render: twenty minutes on, the same ticket says so.
    clock.advance(20 * 60)
    r = await page.get("/tickets")
    assert "due in 22 min" in r.text and "due in 42 min" not in r.text
    clock.advance(30 * 60)  # past due, no breach recorded yet: already breached
    r = await page.get("/tickets")
    assert "breached 8 min ago" in r.text


async def test_the_sla_filter_and_export(page_as, rt, world, clock) -> None:
    await _scene(rt, world, clock)
    page = await page_as(world.staff)
    r = await page.get("/tickets?sla=BREACHED")
    assert "Printer on fire" in r.text and "Cannot log in" not in r.text
    assert "1 ticket matches" in r.text
    assert '<option value="BREACHED" selected>' in r.text
    assert '<input type="hidden" name="sla" value="BREACHED">' in r.text  # Export uses it
    r = await page.hx_get("/tickets?sla=DUE_SOON")
    assert "Cannot log in" in r.text and "Printer on fire" not in r.text
    r = await page.hx_post("/exports", {"sla": "BREACHED"})
    assert r.status_code == 202
    task = (await reads.list_tasks(rt.pg, world.staff, world.team)).items[0]
    assert task.filters == {"assignment": "anyone", "sla": "BREACHED"}
    assert "SLA breached" in r.text  # the task row describes it
    r = await page.get("/tickets?sla=LATE")
    assert r.status_code == 422 and "use one of BREACHED, DUE_SOON, RUNNING" in r.text


async def test_customers_see_no_sla(page_as, rt, world, clock) -> None:
    await _scene(rt, world, clock)
    page = await page_as(world.customer)
    r = await page.get("/tickets")
    assert r.status_code == 200 and "Cannot log in" in r.text
    assert "Due</th>" not in r.text and "due in" not in r.text and "data-sla" not in r.text
    assert 'name="sla"' not in r.text
    r = await page.get(f"/tickets/{world.tickets['login']}")
    assert r.status_code == 200 and "due in" not in r.text and "ticket-sla" not in r.text
    r = await page.get("/tickets?sla=BREACHED")
    assert r.status_code == 422 and "Cannot log in" not in r.text


async def test_the_ticket_page_line(page_as, rt, world, clock) -> None:
    await _scene(rt, world, clock)
    page = await page_as(world.staff)
    r = await page.get(f"/tickets/{world.tickets['printer']}")
    assert r.status_code == 200
    assert 'data-testid="ticket-sla"' in r.text and "breached 3 h ago" in r.text
    r = await page.get(f"/tickets/{world.tickets['resolved']}")
    assert 'data-sla="NONE"' in r.text


async def test_chinese_words(page_as, rt, world, clock) -> None:
    await _scene(rt, world, clock)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'zh-CN' WHERE id = :u"), {"u": world.staff}
        )
    page = await page_as(world.staff)
    r = await page.get("/tickets")
    assert "42 分钟后到期" in r.text and "已超时 3 小时" in r.text and "即将到期" in r.text
