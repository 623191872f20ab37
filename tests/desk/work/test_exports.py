"""Exports: the CSV equals what PostgreSQL returns, formulas are neutralised, only the owner
downloads, and nothing is served after expiry."""

import csv
import io
from datetime import UTC, timedelta

import pytest
import sqlalchemy as sa

from desk.core.errors import NotFound
from desk.work import tasks
from jobs import pruner
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import add_ticket, bulk_tickets
from tests.helpers import export_over_the_limit


async def _export(rt, user, team, filters):
    task = await tasks.create_export(rt, user, team, filters)
    assert await execute(rt, registry(), task.id, task.run) == "done"
    return await tasks.get_task(rt, user, task.id)


async def _csv(rt, user, task_id) -> tuple[bytes, list[list[str]]]:
    f = await tasks.open_export_result(rt, user, task_id)
    data = b"".join([c async for c in f.chunks])
    assert len(data) == f.size
    return data, list(csv.reader(io.StringIO(data.decode("utf-8"))))


async def test_csv_matches_the_database_rows_for_the_same_filters(rt, world):
    for i in range(30):
        await add_ticket(
            rt,
            world.team,
            world.customer,
            f'Bulk {i}, with "quotes"\nand a newline',
            priority=["LOW", "HIGH"][i % 2],
            assignee=world.staff if i % 3 else None,
        )
    task = await _export(rt, world.staff, world.team, {"priority": ["HIGH"], "assignment": "me"})
    data, rows = await _csv(rt, world.staff, task.id)
    assert data.startswith(b"\xef\xbb\xbf")
    rows[0][0] = rows[0][0].removeprefix("\ufeff")
    assert rows[0] == [
        "id",
        "title",
        "status",
        "priority",
        "assignee_email",
        "creator_email",
        "created_at",
        "updated_at",
        "message_count",
        "first_response_at",
        "last_public_reply_at",
        "sla_due_at",
        "sla_breached_at",
    ]
    async with rt.engine.connect() as conn:
        expected = (
            await conn.execute(
                sa.text(
                    "SELECT t.id, t.title, t.status, t.priority, a.email AS assignee, c.email AS creator, t.created_at "
                    "FROM ticket t JOIN app_user c ON c.id = t.creator_id LEFT JOIN app_user a ON a.id = t.assignee_id "
                    "WHERE t.team_id = :t AND t.priority = 'HIGH' AND t.assignee_id = :me ORDER BY t.id"
                ),
                {"t": world.team, "me": world.staff},
            )
        ).all()
    assert len(rows) - 1 == len(expected) == 10
    for got, want in zip(rows[1:], expected, strict=True):
        assert got[:6] == [
            str(want.id),
            want.title,
            want.status,
            want.priority,
            want.assignee or "",
            want.creator,
        ]
        assert got[6] == want.created_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert task.result_summary == "10 rows exported."
    assert task.progress_total == 10


@pytest.mark.parametrize(
    "title", ['=HYPERLINK("http://evil","x")', "+1", "-1", "@SUM(A1)", "\tTabbed", "\rCR"]
)
async def test_formula_cells_are_neutralised(rt, world, title):
    await add_ticket(rt, world.team, world.customer, title)
    task = await _export(rt, world.staff, world.team, {"q": title.strip()[:3]})
    _, rows = await _csv(rt, world.staff, task.id)
    titles = [r[1] for r in rows[1:]]
    assert "'" + title in titles
    assert all(not t or t[0] not in "=+-@\t\r" for t in titles)


async def test_customer_export_contains_only_their_tickets(rt, world):
    task = await _export(rt, world.customer2, world.team, {})
    _, rows = await _csv(rt, world.customer2, task.id)
    assert [r[1] for r in rows[1:]] == ["Printer on fire"]
    assert {r[5] for r in rows[1:]} == {"wang@acme.test"}


async def test_download_is_the_owners_alone_and_ends_at_expiry(rt, world, clock):
    task = await _export(rt, world.customer, world.team, {})
    for other in (world.customer2, world.staff, world.admin, world.outsider):
        with pytest.raises(NotFound):
            await tasks.open_export_result(rt, other, task.id)
    clock.now = task.expires_at + timedelta(seconds=1)
    with pytest.raises(NotFound):
        await tasks.open_export_result(rt, world.customer, task.id)
    assert (
        tasks.status_label(await tasks.get_task(rt, world.customer, task.id), clock()) == "Expired"
    )
    pruned = await pruner.run_once(rt)
    assert pruned.results == 1
    async with rt.engine.connect() as conn:
        left = (await conn.execute(sa.text("SELECT count(*) FROM task_result_chunk"))).scalar_one()
    assert left == 0
    row = await tasks.get_task(rt, world.customer, task.id)
    assert row.status == "COMPLETED" and row.result_bytes is None  # the row stays


async def test_member_removed_after_submitting_gets_no_data(rt, world):
    task = await tasks.create_export(rt, world.customer, world.team, {})
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("DELETE FROM membership WHERE user_id = :u"), {"u": world.customer}
        )
    assert await execute(rt, registry(), task.id, task.run) == "failed"
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text("SELECT status, last_error, attempts FROM background_task WHERE id = :i"),
                {"i": task.id},
            )
        ).one()
        chunks = (
            await conn.execute(sa.text("SELECT count(*) FROM task_result_chunk"))
        ).scalar_one()
    assert row.status == "FAILED" and "no longer a member" in row.last_error and row.attempts == 1
    assert chunks == 0


async def test_pruner_removes_old_finished_rows(rt, world, clock):
    task = await tasks.submit_noop(rt, world.staff, world.team)
    await execute(rt, registry(), task.id, task.run)
    clock.advance(rt.settings.task_retention_days * 86400 + 1)
    assert (await pruner.run_once(rt)).tasks == 1
    with pytest.raises(NotFound):
        await tasks.get_task(rt, world.staff, task.id)


async def test_staff_demoted_to_customer_gets_only_their_own_tickets(rt, world):
    mine = await add_ticket(rt, world.team, world.staff, "Chen's own ticket")
    task = await tasks.create_export(rt, world.staff, world.team, {})
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE membership SET role = 'CUSTOMER' WHERE user_id = :u"),
            {"u": world.staff},
        )
    assert await execute(rt, registry(), task.id, task.run) == "done"
    _, rows = await _csv(rt, world.staff, task.id)
    assert [int(r[0]) for r in rows[1:]] == [mine]


async def test_an_export_over_the_row_limit_fails_at_once_with_a_keyed_reason(rt, world):
    await bulk_tickets(rt, world.team, world.customer, 1_200)
    task_id = await export_over_the_limit(rt, world.staff, world.team, 1_000)
    row = await tasks.get_task(rt, world.staff, task_id)
    assert (row.status, row.attempts) == ("FAILED", 1)
    assert row.last_error == "1,204 rows is more than the limit of 1,000; narrow the filters."
    assert (row.error_key, row.error_params) == (
        "export.too_many_rows",
        {"rows": 1204, "limit": 1000},
    )
