"""The stored export is byte for byte what `COPY (the export's SELECT) TO STDOUT CSV` writes, after
the BOM and header: PostgreSQL builds the CSV in SQL (desk.work.exports.chunk_sql), in id ranges,
on two connections sharing one snapshot, and none of that may show in the file."""

from __future__ import annotations

import asyncio
import contextlib

import psycopg
import pytest
import sqlalchemy as sa

from desk.work import exports, tasks
from jobs.execution import execute
from jobs.processors import export, registry
from tests.desk import slots
from tests.factories import add_ticket
from tests.helpers import wait_for

# Every case COPY's CSV writer treats specially, and the formula guard's.
TITLES = [
    "plain",
    "a,b",
    'say "hi"',
    '"',
    ",",
    "line\nbreak",
    "cr\rhere",
    "crlf\r\n",
    "",
    " ",
    "\\.",
    "back\\slash",
    "tab\tinside",
    "\ttab first",
    "\rCR first",
    "=1+1",
    '=HYPERLINK("http://evil","x")',
    "+1",
    "-",
    "@SUM(A1)",
    "'quoted",
    "''=x",
    "退款 ✓ naïve",
    'all, of "it"\r\nat once',
]


async def _copy(settings, task) -> bytes:
    sql, params = exports.copy_sql(task)
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as conn:
        buf = bytearray()
        async with conn.cursor().copy(sql, params) as copy:
            async for data in copy:
                buf += data
    return bytes(buf)


async def _stored(rt, user, task_id) -> bytes:
    f = await tasks.open_export_result(rt, user, task_id)
    data = b"".join([c async for c in f.chunks])
    assert len(data) == f.size
    return data


async def _chunks(rt, task_id) -> int:
    async with rt.engine.connect() as conn:
        return int(
            (
                await conn.execute(
                    sa.text("SELECT count(*) FROM task_result_chunk WHERE task_id = :t"),
                    {"t": task_id},
                )
            ).scalar_one()
        )


async def _export(rt, user, team, filters):
    task = await tasks.create_export(rt, user, team, filters)
    assert await execute(rt, registry(), task.id, task.run) == "done"
    return await tasks.get_task(rt, user, task.id)


@pytest.mark.parametrize("others_building", [0, 1])
async def test_stored_csv_equals_copy_byte_for_byte(
    rt, settings, world, monkeypatch, others_building
):
    """Alone, an export stores with two writers; while another build holds one of the two
    slots (desk.work.exports.build_slot), its helper steps back and the lead stores every chunk.
    With one slot held, the helper always takes the free one first and the lead waits: it must
    take the helper's slot when that frees, not wait for the one held until the export ends."""
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 4)
    assert rt.settings.export_build_slots == 2
    other = await slots.hold(settings, range(others_building))
    if others_building:
        monkeypatch.setattr(exports, "build_slot", _helper_first(settings, exports.build_slot))
    ids = []
    for i, title in enumerate(TITLES):
        assignee = world.staff if i % 2 else None  # NULL assignee: COPY's quoted empty cell
        ids.append(await add_ticket(rt, world.team, world.customer, title, assignee=assignee))
    async with rt.engine.begin() as conn:
        # New row versions at the end of the heap: the file must still be in id order.
        await conn.execute(
            sa.text("UPDATE ticket SET priority = 'HIGH' WHERE id = ANY(:ids)"),
            {"ids": ids[:8]},
        )
    try:
        # Bounded: a lead waiting for the slot held here would wait for ever.
        task = await asyncio.wait_for(_export(rt, world.staff, world.team, {}), 60)
    finally:
        await other.close()
    stored = await _stored(rt, world.staff, task.id)
    assert stored == exports.HEADER + await _copy(settings, task)
    assert task.progress_current == task.progress_total == stored.count(b"\n") - 1 - 3
    assert await _chunks(rt, task.id) > 2


def _helper_first(settings, build_slot):
    """`build_slot` where the lead writer asks only once the helper holds a slot, and the helper
    builds its first chunk only once the lead waits: the order that used to hang."""
    helper_holds = asyncio.Event()

    @contextlib.asynccontextmanager
    async def ordered(conn, n: int, *, wait: bool):
        if wait and not helper_holds.is_set():
            await asyncio.wait_for(helper_holds.wait(), 30)
        async with build_slot(conn, n, wait=wait) as held:
            if held and not wait and not helper_holds.is_set():
                helper_holds.set()
                await wait_for(lambda: slots.waiting(settings), timeout=30, what="the lead waiting")
            yield held

    return ordered


@pytest.mark.parametrize("rows", [0, 4, 8, 9])
async def test_chunk_ranges_cover_every_row_once(rt, settings, world, monkeypatch, rows):
    """Empty, exactly one chunk, a multiple of the chunk size, one more: no row lost or doubled,
    and no empty chunk after the first (which carries the header even for no rows)."""
    monkeypatch.setattr(export, "ROWS_PER_CHUNK", 4)
    for i in range(rows):
        await add_ticket(rt, world.team, world.customer, f"Chunked {i}")
    task = await _export(rt, world.staff, world.team, {"q": "Chunked"})
    stored = await _stored(rt, world.staff, task.id)
    assert stored == exports.HEADER + await _copy(settings, task)
    assert stored.count(b"Chunked") == rows
    assert task.result_summary == f"{rows} row{'' if rows == 1 else 's'} exported."
    assert await _chunks(rt, task.id) == max(1, -(-rows // 4))
