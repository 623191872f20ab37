"""The recalled tick (desk/reads/recall.py): a tick that finds news is answered from the process's
memory when another page already read the row at its new version — one change costs one read,
not one per page that shows it — and it answers exactly as the statement would, for whoever asks.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from itsdangerous import URLSafeTimedSerializer

from desk.reads import recall, tick
from desk.work import reminders, tasks
from tests.counting import counting
from tests.sessions import signed_in
from tests.ui.test_unchanged_tick import _quiet
from tests.ui.test_watch import watched_rows
from ui.watch import unchanged

DEADLINE = 30.0


async def _reminder(rt, world, clock, minutes: int = 5, ticket: str = "login"):
    at = clock.now + timedelta(minutes=minutes)
    return await reminders.schedule_reminder(rt, world.staff, world.tickets[ticket], at=at)


async def _token(page, task_id: int) -> str:
    (token,) = [
        t for t in watched_rows((await page.get("/tasks")).text) if t.startswith(f"{task_id}:")
    ]
    return token


async def test_a_change_read_by_one_page_is_recalled_for_the_next(
    app, page_as, world, rt, clock
) -> None:
    task = await _reminder(rt, world, clock)
    staff, admin = await page_as(world.staff), await page_as(world.admin)
    tokens = {p: await _token(p, task.id) for p in (staff, admin)}
    for p in (staff, admin):  # both sessions and roles are remembered
        assert (await p.hx_get(f"/watch?r={tokens[p]}&bell=0")).status_code == 204

    clock.advance(1)
    await tasks.cancel_task(rt, world.staff, task.id)
    first = await _quiet(app, staff, f"/watch?r={tokens[staff]}&bell=0")
    assert first.status_code == 200 and 'data-status="Cancelled"' in first.text
    assert first.checkouts == 1  # type: ignore[attr-defined]  # the first to see it reads it
    second = await _quiet(app, admin, f"/watch?r={tokens[admin]}&bell=0")
    assert second.status_code == 200 and 'data-status="Cancelled"' in second.text
    assert second.statements == [] and second.checkouts == 0  # type: ignore[attr-defined]
    assert "Ticket" in second.text or f"#{world.tickets['login']}" in second.text
    assert second.headers["HX-Trigger"] == first.headers["HX-Trigger"]


async def test_new_rows_of_the_list_are_recalled_once_one_page_read_them(
    app, page_as, world, rt, clock
) -> None:
    old = await _reminder(rt, world, clock)
    staff, admin = await page_as(world.staff), await page_as(world.admin)
    url = f"/watch?bell=0&list=tasks&newest={old.id}&limit=8"
    for p in (staff, admin):
        assert (await p.hx_get(url)).status_code == 204
    new = await _reminder(rt, world, clock, minutes=7)
    first = await _quiet(app, staff, url)
    assert first.status_code == 200 and f'id="task-{new.id}"' in first.text
    assert first.checkouts == 1  # type: ignore[attr-defined]
    second = await _quiet(app, admin, url)
    assert second.status_code == 200 and f'id="task-{new.id}"' in second.text
    assert f'data-newest="{new.id}"' in second.text
    assert second.statements == []  # type: ignore[attr-defined]


async def test_a_remembered_row_is_not_shown_to_who_may_not_see_it(
    app, page_as, world, rt, clock
) -> None:
    """The memory holds the whole row; who may see it is decided again for every reader."""
    task = await _reminder(rt, world, clock)
    staff = await page_as(world.staff)
    token = await _token(staff, task.id)
    assert (await staff.hx_get(f"/watch?r={token}")).status_code == 204
    clock.advance(1)
    await tasks.cancel_task(rt, world.staff, task.id)
    assert (await staff.hx_get(f"/watch?r={token}")).status_code == 200  # remembered whole
    for who in (world.customer, world.outsider):
        page = await page_as(who)
        for _ in range(2):  # the second tick: session and roles remembered as well
            r = await page.hx_get(f"/watch?r={token}&list=tasks&newest=1&limit=8")
            assert r.status_code == 200 and 'data-status="Not found"' in r.text
            assert "Cancelled" not in r.text and f'task-{task.id}" class="task tone-muted' in r.text


def _secret(settings, user_id: int) -> str:
    cookie = signed_in(settings, user_id)[0]
    return URLSafeTimedSerializer(settings.secret_key, salt="taskdesk-session").loads(cookie)["sid"]


async def test_recall_answers_as_the_statement_does(app, world, rt, clock) -> None:
    """The recalled tick and the statement's, side by side, for each reader (who may see both
    rows, one, none) and each part: session, rows, the list's newer rows, the list's team."""
    memory, feed = app.state.memory, app.state.runtime.feed
    export = await tasks.create_export(rt, world.staff, world.team, {"q": "x"})
    reminder = await _reminder(rt, world, clock)
    assert await feed.sync() and export.id is not None and reminder.id is not None
    ids = [export.id, reminder.id]
    ask = tick.ListAsk(world.team, 1, 8)
    secrets = {
        u: _secret(app.state.settings, u) for u in (world.staff, world.admin, world.customer)
    }
    for user, secret in secrets.items():
        read = memory.begin()
        try:
            found = await tick.tick(rt.pg, secret, clock(), ids, team_id=world.team, listing=ask)
            assert found is not None
            unchanged.learn(memory, read, secret, found, world.team)
        finally:
            memory.end()
        again = recall.recall(memory, secret, clock(), ids, team_id=world.team, listing=ask)
        assert isinstance(again, tick.Tick), (user, again)
        assert again.session == found.session and again.expires_at == found.expires_at
        assert {k: r.data for k, r in again.rows.items()} == {
            k: r.data for k, r in found.rows.items()
        }
        assert again.listing == found.listing
        assert (again.list_team, again.list_role) == (found.list_team, found.list_role)
        # Made once and shared by the next tick that recalls the same rows for the same role.
        twice = recall.recall(memory, secret, clock(), ids, team_id=world.team, listing=ask)
        assert isinstance(twice, tick.Tick)
        assert all(twice.rows[k] is row for k, row in again.rows.items())
    # What the memory cannot vouch for is not made up: an unknown session, a changed row.
    nobody = recall.recall(memory, "nobody", clock(), ids, team_id=world.team, listing=ask)
    assert nobody == recall.HARD
    await tasks.cancel_task(rt, world.staff, export.id)
    assert await feed.sync()
    staff = secrets[world.staff]
    still = recall.recall(memory, staff, clock(), [reminder.id], team_id=world.team, listing=None)
    assert isinstance(still, tick.Tick)
    # The cancelled row is known at a version not read whole: that row alone is missing.
    changed = recall.recall(memory, staff, clock(), ids, team_id=world.team, listing=None)
    assert isinstance(changed, recall.Gap) and changed.rows == frozenset({export.id})
    assert set(changed.known) == {reminder.id} and not changed.list_missing


async def test_pages_that_tick_while_a_change_is_read_wait_for_that_read(
    app, page_as, world, rt, clock
) -> None:
    task = await _reminder(rt, world, clock)
    pages = [await page_as(u) for u in (world.staff, world.admin)]
    urls = [f"/watch?r={await _token(p, task.id)}" for p in pages]
    for p, url in zip(pages, urls, strict=True):
        assert (await p.hx_get(url)).status_code == 204
    clock.advance(1)
    await tasks.cancel_task(rt, world.staff, task.id)
    with counting(app.state.runtime.pg) as seen:
        answers = await asyncio.gather(*(p.hx_get(u) for p, u in zip(pages, urls, strict=True)))
    assert all(r.status_code == 200 and 'data-status="Cancelled"' in r.text for r in answers)
    assert seen.count("checkout") == 1  # one read of the changed row, for both pages


async def test_a_read_under_way_is_waited_for_once_and_only_while_it_lasts(app) -> None:
    memory = app.state.memory
    promised = memory.promise([41, 42])
    assert memory.promise([42]) == []  # one read of a row at a time
    waiting = asyncio.create_task(memory.after_reads([41, 42], DEADLINE))
    done, _ = await asyncio.wait([waiting], timeout=0.05)
    assert not done  # until the read is settled
    memory.settle(promised)
    assert await waiting is True
    assert await memory.after_reads([41], DEADLINE) is False  # nothing under way: read it
    assert await memory.after_reads([], DEADLINE) is False


async def test_a_tick_missing_one_row_reads_that_row_alone(
    app, page_as, world, rt, clock, monkeypatch
) -> None:
    """The statement reads what the memory lacks (the changed row, with the session), not
    every row the page watches; the others come from memory, and the answer is the same."""
    first = await _reminder(rt, world, clock)
    second = await _reminder(rt, world, clock, ticket="printer")
    page = await page_as(world.staff)
    tokens = [await _token(page, t.id) for t in (first, second)]
    url = "/watch?" + "&".join(f"r={t}" for t in tokens) + "&bell=0"
    assert (await page.hx_get(url)).status_code == 204
    clock.advance(1)
    await tasks.cancel_task(rt, world.staff, second.id)
    asked: list[list[int]] = []
    real = tick.tick

    async def spy(pg, secret, now, ids, **kw):  # type: ignore[no-untyped-def]
        asked.append(list(ids))
        return await real(pg, secret, now, ids, **kw)

    monkeypatch.setattr(tick, "tick", spy)
    r = await page.hx_get(url)
    assert r.status_code == 200 and f'id="task-{second.id}"' in r.text
    assert 'data-status="Cancelled"' in r.text and f'id="task-{first.id}"' not in r.text
    assert asked == [[second.id]]
