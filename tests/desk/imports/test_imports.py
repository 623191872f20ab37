"""Imports: round trip from an export, create vs upsert, one per team, the bad-row report,
limits, who may import and where the tickets show up."""

import asyncio
import csv
import io

import pytest
import sqlalchemy as sa

from desk.core.errors import NotAllowed, NotFound, TaskConflict, ValidationProblem
from desk.helpdesk import tickets
from desk.helpdesk.filters import parse_filter
from desk.imports import service as imports
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import add_ticket

HEADER = "external_id,title,status,priority,assignee_email,creator_email\n"


async def _run_import(rt, user, team, data: bytes, mode="create"):
    upload = await imports.store_upload(rt, user, team, "tickets.csv", data)
    task = await imports.start_import(rt, user, team, upload.id, mode)
    assert await execute(rt, registry(), task.id, task.run) == "done"
    return await tasks.get_task(rt, user, task.id)


async def _titles(rt, user, team):
    page = await tickets.list_tickets(rt, user, team, parse_filter({}), first=200)
    return {t.external_id: (t.title, t.status, t.priority, t.assignee_id) for t in page.items}


async def _report(rt, user, task_id):
    chunks = await imports.open_report(rt, user, task_id)
    data = b"".join([c async for c in chunks]).decode("utf-8-sig")
    return list(csv.reader(io.StringIO(data)))[1:]


async def test_export_then_import_into_the_second_team_gives_the_same_tickets(rt, world):
    async with rt.engine.begin() as conn:  # Chen works for both teams, so assignees carry over
        await conn.execute(
            sa.text("INSERT INTO membership (user_id, team_id, role) VALUES (:u, :t, 'STAFF')"),
            {"u": world.staff, "t": world.other_team},
        )
    export = await tasks.create_export(rt, world.staff, world.team, {})
    await execute(rt, registry(), export.id, export.run)
    f = await tasks.open_export_result(rt, world.staff, export.id)
    data = b"".join([c async for c in f.chunks])
    task = await _run_import(rt, world.outsider, world.other_team, data)
    assert (
        task.status == "COMPLETED"
        and task.result_summary == "4 created, 0 updated, 0 unchanged, 0 rejected."
    )
    source = await tickets.list_tickets(rt, world.staff, world.team, parse_filter({}), first=200)
    imported = await _titles(rt, world.outsider, world.other_team)
    for t in source.items:
        assert imported[str(t.id)] == (t.title, t.status, t.priority, t.assignee_id)
    assert imported[str(world.tickets["formula"])][0].startswith("=HYPERLINK"), (
        "the export's formula guard is undone"
    )
    again = await _run_import(rt, world.outsider, world.other_team, data)
    assert again.result_summary == "0 created, 0 updated, 4 unchanged, 0 rejected."


async def test_create_leaves_existing_upsert_updates_them(rt, world):
    first = (
        HEADER
        + "A-1,Printer jam,OPEN,LOW,,\nA-2,Login broken,OPEN,HIGH,chen@acme.test,lin@acme.test\n"
    ).encode()
    t1 = await _run_import(rt, world.admin, world.team, first)
    assert t1.stats == {"created": 2, "updated": 0, "unchanged": 0, "rejected": 0}
    second = (
        HEADER
        + "A-1,Printer jam (again),PENDING,LOW,,\nA-2,Login broken,OPEN,HIGH,chen@acme.test,\nA-3,New one,,,,\n"
    ).encode()
    t2 = await _run_import(rt, world.admin, world.team, second, mode="create")
    assert t2.stats == {"created": 1, "updated": 0, "unchanged": 2, "rejected": 0}
    assert (await _titles(rt, world.admin, world.team))["A-1"][:2] == ("Printer jam", "OPEN")
    t3 = await _run_import(rt, world.admin, world.team, second, mode="upsert")
    assert t3.stats == {"created": 0, "updated": 1, "unchanged": 2, "rejected": 0}
    rows = await _titles(rt, world.admin, world.team)
    assert rows["A-1"][:2] == ("Printer jam (again)", "PENDING") and rows["A-3"][1:3] == (
        "OPEN",
        "NORMAL",
    )


async def test_bad_rows_are_reported_and_do_not_stop_the_import(rt, world):
    data = (
        (
            HEADER
            + "B-1,Fine,OPEN,LOW,,\n"
            + "B-2,,OPEN,LOW,,\n"
            + "B-3,Weird status,DONE,LOW,,\n"
            + "B-4,Nobody,OPEN,LOW,ghost@acme.test,\n"
            + "B-5,Too,many,cells,here,x,y\n"
            + "B-1,Duplicate,OPEN,LOW,,\n"
        ).encode()
        + "B-6,Caf\xe9 latin-1,OPEN,LOW,,\n".encode("latin-1")
        + b'B-7,"unterminated,OPEN,LOW,,\n'
    )
    task = await _run_import(rt, world.admin, world.team, data)
    report = await _report(rt, world.admin, task.id)
    reasons = {int(r[0]): (r[1], r[2]) for r in report}
    assert reasons[3] == ("title", "missing")
    assert reasons[4][0] == "status" and "DONE" in reasons[4][1]
    assert reasons[5] == ("assignee_email", "unknown assignee ghost@acme.test")
    assert "expected 6 columns" in reasons[6][1]
    assert reasons[7] == ("external_id", "duplicate of row 2")
    assert "UTF-8" in reasons[8][1]
    assert 9 in reasons
    assert task.stats["created"] == 1 and task.stats["rejected"] == len(reasons)
    assert set(await _titles(rt, world.admin, world.team)) >= {"B-1"}


@pytest.mark.parametrize(
    "data,message",
    [
        (b"", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00", "not a CSV"),
        (b"name,age\nx,1\n", "title and external_id"),
    ],
)
async def test_files_that_are_not_ticket_csvs_fail_fast(rt, world, data, message):
    with pytest.raises(ValidationProblem) as err:
        await imports.store_upload(rt, world.admin, world.team, "x.csv", data)
    assert message in err.value.detail


async def test_size_limit(rt, world):
    rt.settings = rt.settings.model_copy(update={"import_max_bytes": 2048})
    with pytest.raises(ValidationProblem) as err:
        await imports.store_upload(
            rt, world.admin, world.team, "x.csv", HEADER.encode() + b"x" * 4096
        )
    assert "limit" in err.value.detail


async def test_only_admins_import_and_others_see_nothing(rt, world):
    data = (HEADER + "C-1,Imported,OPEN,LOW,,\n").encode()
    for refused, error in (
        (world.staff, NotAllowed),
        (world.customer, NotAllowed),
        (world.outsider, NotFound),
    ):
        with pytest.raises(error):
            await imports.store_upload(rt, refused, world.team, "x.csv", data)
    upload = await imports.store_upload(rt, world.admin, world.team, "x.csv", data)
    with pytest.raises(NotFound):  # someone else's upload id is as good as missing
        await imports.start_import(rt, world.outsider, world.other_team, upload.id, "create")
    with pytest.raises(ValidationProblem):
        await imports.start_import(rt, world.admin, world.team, upload.id, "merge")
    task = await imports.start_import(rt, world.admin, world.team, upload.id, "create")
    await execute(rt, registry(), task.id, task.run)
    for refused in (world.staff, world.customer, world.outsider):
        with pytest.raises(NotFound):
            await imports.open_report(rt, refused, task.id)
    assert "C-1" not in await _titles(rt, world.outsider, world.other_team)
    assert "C-1" in await _titles(rt, world.staff, world.team)


async def test_concurrent_triggers_make_one_import(rt, world):
    data = (HEADER + "D-1,x,OPEN,LOW,,\n").encode()
    upload = await imports.store_upload(rt, world.admin, world.team, "x.csv", data)
    results = await asyncio.gather(
        *(
            imports.start_import(rt, world.admin, world.team, upload.id, "create")
            for _ in range(10)
        ),
        return_exceptions=True,
    )
    made = [r for r in results if not isinstance(r, BaseException)]
    conflicts = [r for r in results if isinstance(r, TaskConflict)]
    assert len(made) == 1 and len(conflicts) == 9
    assert {c.existing.id for c in conflicts} == {made[0].id}


async def test_submit_import_keeps_nothing_on_conflict(rt, world):
    data = (HEADER + "S-1,x,OPEN,LOW,,\n").encode()
    first = await imports.submit_import(rt, world.admin, world.team, "a.csv", data, "create")
    with pytest.raises(TaskConflict) as err:
        await imports.submit_import(rt, world.admin, world.team, "b.csv", data, "create")
    assert err.value.existing.id == first.id
    with pytest.raises(ValidationProblem):
        await imports.submit_import(
            rt, world.outsider, world.other_team, "c.csv", b"\x00junk", "create"
        )
    async with rt.engine.connect() as conn:
        names = (await conn.execute(sa.text("SELECT filename FROM upload"))).scalars().all()
    assert names == ["a.csv"]


def _big_file(prefix: str, rows: int) -> bytes:
    """Enough good rows to pass the first 64 KB and the first batch."""
    return (
        HEADER + "".join(f"{prefix}-{i},Row {i} {'x' * 60},OPEN,LOW,,\n" for i in range(rows))
    ).encode()


async def _ticket_count(rt) -> int:
    async with rt.engine.connect() as conn:
        return (await conn.execute(sa.text("SELECT count(*) FROM ticket"))).scalar_one()


async def test_a_late_nul_byte_rejects_the_whole_file_before_any_row(rt, world):
    data = _big_file("N", 1500) + b"N-late,Bad \x00 title,OPEN,LOW,,\n"
    assert data.index(b"\x00") > 65536
    with pytest.raises(ValidationProblem) as err:
        await imports.store_upload(rt, world.admin, world.team, "late.csv", data)
    assert err.value.field == "file" and "NUL" in err.value.detail and "1,502" in err.value.detail


async def test_a_stored_file_with_a_late_nul_fails_whole_without_a_database_error(rt, world):
    """A file stored before the whole-file check (or by another path) is checked again by the
    worker before its first batch: nothing is applied, the error is readable."""
    before = await _ticket_count(rt)
    data = _big_file("W", 1500) + b"W-late,Bad \x00 title,OPEN,LOW,,\n"
    upload = await imports.store_upload(rt, world.admin, world.team, "ok.csv", _big_file("W", 1))
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE upload SET data = :d WHERE id = :id"),
                           {"d": data, "id": upload.id})  # fmt: skip
    task = await imports.start_import(rt, world.admin, world.team, upload.id, "create")
    await execute(rt, registry(), task.id, task.run)
    done = await tasks.get_task(rt, world.admin, task.id)
    assert done.status == "FAILED" and "NUL" in (done.last_error or ""), done.last_error
    assert "psycopg" not in done.last_error and "INSERT" not in done.last_error
    assert await _ticket_count(rt) == before


async def test_late_control_characters_and_bad_bytes_reject_only_their_rows(rt, world):
    data = (
        _big_file("C", 1200)
        + b"C-bell,Ring \x07 ring,OPEN,LOW,,\n"
        + b"C-esc,Escape \x1b[31m,OPEN,LOW,,\n"
        + "C-latin,Caf\xe9,OPEN,LOW,,\n".encode("latin-1")
        + b"C-last,Fine,OPEN,LOW,,\n"
    )
    task = await _run_import(rt, world.admin, world.team, data)
    assert task.status == "COMPLETED"
    assert task.stats == {"created": 1201, "updated": 0, "unchanged": 0, "rejected": 3}
    reasons = {int(r[0]): (r[1], r[2]) for r in await _report(rt, world.admin, task.id)}
    assert reasons[1202] == ("title", "contains a control character (\\u0007); remove it")
    assert reasons[1203][0] == "title" and "\\u001b" in reasons[1203][1]
    assert "UTF-8" in reasons[1204][1]


@pytest.mark.parametrize(
    "header", ["external_id,title,title\n", "external_id,Title, title \n", "id,title,id\n"]
)
async def test_a_column_named_twice_is_an_error(rt, world, header):
    data = (header + "E-1,One,Two\n").encode()
    with pytest.raises(ValidationProblem) as err:
        await imports.store_upload(rt, world.admin, world.team, "twice.csv", data)
    assert "more than once" in err.value.detail


async def test_the_export_guard_is_undone_exactly_and_only_where_the_export_added_it(rt, world):
    titles = ["'=truly mine", "=SUM(A1)", "'plain quote", "''double", "+1", "normal"]
    for title in titles:
        await add_ticket(rt, world.team, world.customer, title)
    export = await tasks.create_export(rt, world.staff, world.team, {})
    await execute(rt, registry(), export.id, export.run)
    f = await tasks.open_export_result(rt, world.staff, export.id)
    data = b"".join([c async for c in f.chunks])
    task = await _run_import(rt, world.outsider, world.other_team, data)
    assert task.status == "COMPLETED"  # (tickets assigned to Chen are rejected: not a member)
    imported = {t[0] for t in (await _titles(rt, world.outsider, world.other_team)).values()}
    assert set(titles) <= imported, imported
    # A file written by hand: a leading ' is the person's own and stays.
    hand = (HEADER + "H-1,'=kept,OPEN,LOW,,\n").encode()
    await _run_import(rt, world.admin, world.team, hand)
    assert (await _titles(rt, world.admin, world.team))["H-1"][0] == "'=kept"
