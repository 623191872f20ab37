"""The unchanged tick (ui/watch/unchanged.py, desk/reads/memory.py): a tick whose rows, list, bell and
session did not change is answered from the process's memory of the change feed, with no
statement at all; any change, and anything the memory cannot vouch for, is read as before."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import psycopg
import pytest
import sqlalchemy as sa
from fastapi import FastAPI

from api.app import create_app
from desk.core.settings import Settings
from desk.helpdesk import notifications
from desk.people import sessions
from desk.work import reminders, tasks
from tests.counting import counting, engine_statements
from tests.sessions import signed_in
from tests.ui.test_watch import watched_rows
from web.auth import SESSION_COOKIE

DEADLINE = 30.0


async def _quiet(app: FastAPI, page, url: str) -> httpx.Response:
    """The tick, counting every statement the app sends for it (none is the point)."""
    rt = app.state.runtime
    with counting(rt.pg) as pg_seen, engine_statements(rt.engine) as orm_seen:
        r = await page.hx_get(url)
    r.statements = [s for s in pg_seen if s != "checkout"] + orm_seen  # type: ignore[attr-defined]
    r.checkouts = pg_seen.count("checkout")  # type: ignore[attr-defined]
    return r


async def test_an_unchanged_tick_runs_no_statement_and_a_change_is_read(
    app, page_as, world, rt, clock
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    url = f"/watch?r={token}&bell=0&h=1-0&list=tasks&newest={task.id}&limit=8"
    first = await page.hx_get(url)  # the memory learns the session and the row here
    assert first.status_code == 204
    mark = first.headers["X-Watch-Mark"]
    for _ in range(3):
        r = await _quiet(app, page, f"{url}&mark={mark}")
        assert r.status_code == 204 and r.content == b""
        assert r.statements == [] and r.checkouts == 0  # type: ignore[attr-defined]
        assert float(r.headers["X-Poll-In"]) > 0

    clock.advance(1)
    await tasks.cancel_task(rt, world.staff, task.id)  # a change: read and answered
    r = await _quiet(app, page, f"{url}&mark={mark}")
    assert r.status_code == 200 and 'data-status="Cancelled"' in r.text
    assert r.checkouts == 1  # type: ignore[attr-defined]


async def test_the_bell_a_new_task_and_an_ended_session_are_never_missed(
    app, page_as, world, rt
) -> None:
    page = await page_as(world.staff)
    url = "/watch?bell=0&list=tasks&newest=0&limit=8"
    first = await page.hx_get(url)
    assert first.status_code == 204
    url += f"&mark={first.headers['X-Watch-Mark']}"
    assert (await _quiet(app, page, url)).statements == []  # type: ignore[attr-defined]

    # Another person's export: the staff member may not see it; still nothing to read.
    await tasks.create_export(rt, world.admin, world.team, {})
    r = await _quiet(app, page, url)
    assert r.status_code == 204 and r.statements == []  # type: ignore[attr-defined]
    # Their own, made elsewhere (another tab, GraphQL): the list gets it.
    mine = await tasks.create_export(rt, world.staff, world.team, {})
    r = await page.hx_get(url)
    assert r.status_code == 200 and f'id="task-{mine.id}"' in r.text

    async with rt.engine.begin() as conn:
        await notifications.insert_many(
            conn,
            user_ids=[world.staff],
            team_id=world.team,
            task_id=None,
            kind="REMINDER",
            text="Ping",
            link="/tickets",
        )
    r = await page.hx_get(f"/watch?bell=0&list=tasks&newest={mine.id}&limit=8")
    assert r.status_code == 200 and 'data-seen="1"' in r.text

    await sessions.revoke_all(rt, world.staff)  # signed out everywhere
    r = await page.hx_get(f"/watch?bell=1&list=tasks&newest={mine.id}&limit=8")
    assert r.headers["HX-Redirect"].startswith("/login")  # sent to sign in, not a quiet 204


async def test_a_label_that_time_alone_turns_is_worked_out_from_the_remembered_times(
    app, page_as, world, rt, clock
) -> None:
    due = clock.now + timedelta(minutes=1)
    task = await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], at=due)
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    assert (await page.hx_get(f"/watch?r={token}")).status_code == 204
    r = await _quiet(app, page, f"/watch?r={token}")
    assert r.status_code == 204 and r.statements == []  # type: ignore[attr-defined]
    clock.advance(60)  # Scheduled → Queued, with no commit at all
    r = await page.hx_get(f"/watch?r={token}")
    assert r.status_code == 200 and f'id="task-{task.id}"' in r.text
    assert 'data-status="Queued"' in r.text


async def test_a_hidden_row_is_read_and_answers_like_a_missing_one(app, page_as, world, rt) -> None:
    await tasks.create_export(rt, world.staff, world.team, {})
    owner = await page_as(world.staff)
    (token,) = watched_rows((await owner.get("/tasks")).text)
    assert (await owner.hx_get(f"/watch?r={token}")).status_code == 204
    other = await page_as(world.customer)
    for _ in range(2):  # the memory knows the row, and the customer may not see it
        r = await other.hx_get(f"/watch?r={token}")
        assert r.status_code == 200 and 'data-status="Not found"' in r.text


async def test_after_the_listener_reconnects_the_memory_starts_again(
    app, page_as, world, rt
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    (token,) = watched_rows((await page.get("/tasks")).text)
    url = f"/watch?r={token}&bell=0"
    await page.hx_get(url)
    assert (await _quiet(app, page, url)).statements == []  # type: ignore[attr-defined]
    feed = app.state.runtime.feed
    generation = feed.generation
    async with await psycopg.AsyncConnection.connect(
        rt.settings.libpq_url, autocommit=True
    ) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", (feed.backend_pid,))
        # Changed while nobody listened: the notice is lost, the change is not.
        await admin.execute(
            "UPDATE background_task SET status = 'CANCELLED', updated_at = now() WHERE id = %s",
            (task.id,),
        )

    assert await feed.wait_connected(DEADLINE, after=generation)
    r = await _quiet(app, page, url)
    assert r.status_code == 200 and 'data-status="Cancelled"' in r.text
    assert r.checkouts == 1  # type: ignore[attr-defined]


@pytest.fixture
async def second_app(settings: Settings, clock) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        application.state.runtime.clock = clock
        yield application


async def test_two_web_processes_each_see_changes_made_through_the_other(
    app, second_app, world, rt, clock
) -> None:
    """Two apps (two web processes' worth: each its own pools, listener and memory) over one
    database: a row cancelled through one is news at the other's next tick."""
    cookie, csrf = signed_in(app.state.settings, world.staff)
    clients = []
    for a in (app, second_app):
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://test")
        c.cookies.set(SESSION_COOKIE, cookie)
        clients.append(c)
    try:
        for (one, other), a, b in [(clients, app, second_app), (clients[::-1], second_app, app)]:
            task = await tasks.create_export(rt, world.staff, world.team, {"q": str(id(one))})
            (token,) = [
                t
                for t in watched_rows((await one.get("/tasks")).text)
                if t.startswith(f"{task.id}:")
            ]
            hx = {"HX-Request": "true"}
            assert await a.state.runtime.feed.sync()
            assert (await one.get(f"/watch?r={token}", headers=hx)).status_code == 204
            clock.advance(1)
            cancel = await other.post(
                f"/tasks/{task.id}/cancel", headers=hx | {"X-CSRF-Token": csrf}
            )
            assert cancel.status_code == 200, cancel.text
            assert await a.state.runtime.feed.sync() and await b.state.runtime.feed.sync()
            r = await one.get(f"/watch?r={token}", headers=hx)
            assert r.status_code == 200 and 'data-status="Cancelled"' in r.text
    finally:
        for c in clients:
            await c.aclose()


async def test_memory_stays_out_of_the_way_of_a_read_that_raced_a_notice(app, world, rt) -> None:
    """A read that began before a notice about the same row must not store its older copy."""
    memory = app.state.memory
    feed = app.state.runtime.feed
    assert await feed.sync()
    task = await tasks.create_export(rt, world.staff, world.team, {})
    assert await feed.sync()
    note = memory.row(task.id)
    assert note is not None and note.status == "WAITING"
    reading = memory.begin()
    try:
        async with rt.engine.begin() as conn:
            await conn.execute(
                sa.text(
                    "UPDATE background_task SET status = 'CANCELLED', updated_at = now() "
                    "WHERE id = :i"
                ),
                {"i": task.id},
            )
        assert await feed.sync()
        memory.rows.pop(task.id)  # as if forgotten (the bound): only a read could fill it in
        memory.learn_row(reading, note)  # the old copy, read before the notice
    finally:
        memory.end()
    assert memory.row(task.id) is None  # not stored: the next tick reads the database
