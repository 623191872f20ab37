"""An export's SLA columns: sla_due_at and sla_breached_at last, ISO-8601 UTC, empty when none;
staff's exports only (a customer's carries them empty); the SLA filter selects as the list's,
read at the moment the export was asked; the chunks equal COPY's bytes."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import psycopg
import sqlalchemy as sa

from desk.work import exports, tasks
from jobs.execution import execute
from jobs.processors import registry


def iso(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _set_sla(rt, ticket_id: int, due: datetime | None, breached: datetime | None) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET sla_due_at = :d, sla_breached_at = :b WHERE id = :id"),
            {"d": due, "b": breached, "id": ticket_id},
        )


async def _export(rt, user: int, team: int, filters=None) -> tuple[bytes, dict[int, dict]]:
    task = await tasks.create_export(rt, user, team, filters or {})
    assert await execute(rt, registry(), task.id, task.run) == "done"
    f = await tasks.open_export_result(rt, user, task.id)
    data = b"".join([c async for c in f.chunks])
    sql, params = exports.copy_sql(await tasks.get_task(rt, user, task.id))
    async with await psycopg.AsyncConnection.connect(rt.settings.libpq_url, autocommit=True) as c:
        buf = bytearray()
        async with c.cursor().copy(sql, params) as copy:
            async for chunk in copy:
                buf += chunk
    assert data == exports.HEADER + bytes(buf)  # the stored chunks are COPY's CSV, byte for byte
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))
    return data, {int(r["id"]): r for r in rows}


async def test_staff_export_carries_the_sla_columns_last(rt, world, clock) -> None:
    now = clock().replace(microsecond=0)
    login, printer = world.tickets["login"], world.tickets["printer"]
    await _set_sla(rt, login, now + timedelta(minutes=42), None)
    await _set_sla(rt, printer, None, now - timedelta(hours=3))
    data, rows = await _export(rt, world.staff, world.team)
    assert exports.COLUMNS[-2:] == ("sla_due_at", "sla_breached_at")
    assert exports.HEADER.endswith(b",last_public_reply_at,sla_due_at,sla_breached_at\n")
    assert data.startswith(exports.HEADER)
    assert (rows[login]["sla_due_at"], rows[login]["sla_breached_at"]) == (
        iso(now + timedelta(minutes=42)),
        "",
    )
    assert (rows[printer]["sla_due_at"], rows[printer]["sla_breached_at"]) == (
        "",
        iso(now - timedelta(hours=3)),
    )
    resolved = rows[world.tickets["resolved"]]
    assert (resolved["sla_due_at"], resolved["sla_breached_at"]) == ("", "")


async def test_a_customers_export_has_the_columns_empty(rt, world, clock) -> None:
    now = clock()
    login = world.tickets["login"]  # the customer's own
    await _set_sla(rt, login, now + timedelta(minutes=42), now - timedelta(hours=1))
    data, rows = await _export(rt, world.customer, world.team)
    assert data.startswith(exports.HEADER)  # the same shape as staff's
    assert login in rows
    assert all(r["sla_due_at"] == r["sla_breached_at"] == "" for r in rows.values())


async def test_the_sla_filter_selects_as_the_list_does(rt, world, clock) -> None:
    now = clock()
    login, printer, formula = (world.tickets[k] for k in ("login", "printer", "formula"))
    await _set_sla(rt, login, now + timedelta(minutes=30), None)  # due soon
    await _set_sla(rt, printer, now + timedelta(hours=5), None)  # running
    await _set_sla(rt, formula, None, now - timedelta(minutes=5))  # breached
    for sla, want in (("DUE_SOON", {login}), ("RUNNING", {printer}), ("BREACHED", {formula})):
        _, rows = await _export(rt, world.staff, world.team, {"sla": sla})
        assert set(rows) == want, sla
    # Read at the moment asked: an hour on, the due-soon one has breached.
    clock.advance(3600)
    _, rows = await _export(rt, world.staff, world.team, {"sla": "BREACHED"})
    assert set(rows) == {login, formula}
    # A customer's SLA filter matches nothing (SLA is staff's).
    _, rows = await _export(rt, world.customer, world.team, {"sla": "BREACHED"})
    assert rows == {}
