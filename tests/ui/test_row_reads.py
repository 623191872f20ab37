"""The polled task row on desk.reads.tasks: who sees which row (a hidden one answers exactly as a
missing one, byte for byte), and what one poll costs the database: one checkout, one statement,
nothing through the SQLAlchemy engine (no BEGIN/ROLLBACK, no pre-ping)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from desk.work import reminders, tasks
from tests.counting import counting

MISSING = 99_999


@pytest.fixture
async def rows(rt, world):
    staff_export = await tasks.create_export(rt, world.staff, world.team, {"q": "staff"})
    customer_export = await tasks.create_export(rt, world.customer, world.team, {"q": "mine"})
    reminder = await reminders.schedule_reminder(
        rt, world.staff, world.tickets["login"], in_minutes=30
    )
    return {"staff": staff_export.id, "customer": customer_export.id, "reminder": reminder.id}


async def _row(page, task_id: int) -> tuple[int, str]:
    r = await page.hx_get(f"/tasks/{task_id}")
    return r.status_code, r.text.replace(str(task_id), "ID")


@pytest.mark.parametrize(
    ("who", "sees"),
    [
        ("admin", {"reminder"}),
        ("staff", {"staff", "reminder"}),
        ("customer", {"customer"}),
        ("customer2", set()),
        ("outsider", set()),
    ],
)
async def test_each_person_polls_only_rows_they_may_see(page_as, world, rows, who, sees) -> None:
    page = await page_as(getattr(world, who))
    missing = await _row(page, MISSING)
    assert missing[0] == 404
    for name, task_id in rows.items():
        status, text = await _row(page, task_id)
        if name in sees:
            assert status == 200 and 'data-task-id="ID"' in text, (who, name)
        else:
            assert (status, text) == missing, (who, name)  # same status, same bytes


@contextmanager
def engine_statements(engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine.sync_engine, "before_cursor_execute", record)


async def test_a_row_poll_is_one_checkout_and_one_statement(app, page_as, world, rows) -> None:
    page = await page_as(world.staff)
    rt = app.state.runtime
    for task_id in (rows["staff"], rows["reminder"]):
        with counting(rt.pg) as seen, engine_statements(rt.engine) as engine:
            r = await page.hx_get(f"/tasks/{task_id}?since=1")
        assert r.status_code == 200 and f'data-task-id="{task_id}"' in r.text
        assert seen[0] == "checkout" and len(seen) == 2, seen  # the session, user and task
        assert engine == []


async def test_a_bell_poll_is_one_statement_with_the_right_count(app, page_as, world) -> None:
    rt = app.state.runtime
    async with rt.engine.begin() as conn:
        for read_at in (None, None, "now()"):
            await conn.execute(
                sa.text(
                    "INSERT INTO notification (user_id, team_id, kind, text, read_at) "
                    f"VALUES (:u, :t, 'reminder', 'Ping', {read_at or 'NULL'})"
                ),
                {"u": world.staff, "t": world.team},
            )
    page = await page_as(world.staff)
    with counting(rt.pg) as seen, engine_statements(rt.engine) as engine:
        r = await page.hx_get("/notifications/badge")
    assert r.status_code == 200 and 'data-unread="2"' in r.text
    assert seen[0] == "checkout" and len(seen) == 2, seen
    assert engine == []
    other = await page_as(world.customer)
    assert 'data-unread="0"' in (await other.hx_get("/notifications/badge")).text
