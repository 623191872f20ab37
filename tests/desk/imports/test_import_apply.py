"""Imports, the write path: a prepared batch's new tickets go in with COPY, the existing ones are
updated or counted. Rejections from the reader and from the people lookup share the report; a
batch applied again (after a kill, before or after its commit) writes nothing twice; upsert
semantics; a ticket given the batch's external id meanwhile makes the batch start again."""

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from desk.imports import apply as import_apply
from desk.imports import batch as import_batch
from desk.imports import reader as import_csv
from desk.imports import service as imports
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry

HEADER = "external_id,title,status,priority,assignee_email,creator_email,created_at\n"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


class Killed(Exception):
    """Stands in for a worker dying after the batch's statements, before its commit."""


async def _task(rt, world, mode):
    upload = await imports.store_upload(rt, world.admin, world.team, "t.csv", HEADER.encode())
    return await imports.start_import(rt, world.admin, world.team, upload.id, mode)


async def _apply(rt, task, data: bytes) -> import_apply.Counts:
    payload = import_batch.prepare(import_csv.parse(data), task.team_id)
    async with rt.engine.begin() as conn:
        return await import_apply.apply_batch(conn, task, payload, now=NOW)


async def _tickets(rt, team):
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT external_id, title, status, priority, assignee_id, creator_id, created_at, "
                "updated_at FROM ticket WHERE team_id = :t AND external_id IS NOT NULL"
            ),
            {"t": team},
        )
        return {r.external_id: r for r in rows}


async def _rejections(rt, task_id):
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT row_number, column_name, reason FROM import_rejection WHERE task_id = :t "
                "ORDER BY row_number"
            ),
            {"t": task_id},
        )
        return [tuple(r) for r in rows]


MIXED = (
    HEADER
    + "M-1,Fine,OPEN,LOW,chen@acme.test,lin@acme.test,2024-01-02T03:04:05Z\n"
    + "M-2,,OPEN,LOW,,,\n"  # reader: no title
    + "M-3,Assigned to a customer,OPEN,LOW,lin@acme.test,,\n"  # SQL: not staff
    + "M-4,Nobody,OPEN,LOW,ghost@acme.test,,\n"  # SQL: no such person
    + "M-5,Back\\slash \\N,pending,urgent,,ghost@acme.test,\n"  # unknown creator: importer
    + "M-6,Odd,DONE,LOW,,,\n"  # reader: bad status
    + "M-1,Again,OPEN,LOW,,,\n"  # reader: duplicate
).encode()


async def test_a_batch_with_rejected_rows_mixed_in(rt, world):
    task = await _task(rt, world, "create")
    counts = await _apply(rt, task, MIXED)
    assert counts.as_dict() == {"created": 2, "updated": 0, "unchanged": 0, "rejected": 5}
    assert await _rejections(rt, task.id) == [
        (3, "title", "missing"),
        (4, "assignee_email", "unknown assignee lin@acme.test"),
        (5, "assignee_email", "unknown assignee ghost@acme.test"),
        (7, "status", "unknown status 'DONE'"),
        (8, "external_id", "duplicate of row 2"),
    ]
    got = await _tickets(rt, world.team)
    assert set(got) == {"M-1", "M-5"}
    assert (got["M-1"].assignee_id, got["M-1"].creator_id) == (world.staff, world.customer)
    assert got["M-1"].created_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (got["M-5"].title, got["M-5"].status, got["M-5"].priority) == (
        "Back\\slash \\N",  # COPY's escapes: neither a NULL nor a lost backslash
        "PENDING",
        "URGENT",
    )
    assert (got["M-5"].assignee_id, got["M-5"].creator_id) == (None, world.admin)
    assert got["M-5"].created_at == NOW


async def test_a_batch_run_again_after_a_kill_applies_nothing_twice(rt, world):
    task = await _task(rt, world, "create")
    payload = import_batch.prepare(import_csv.parse(MIXED), task.team_id)
    with pytest.raises(Killed):  # killed before the commit: the batch leaves nothing behind
        async with rt.engine.begin() as conn:
            await import_apply.apply_batch(conn, task, payload, now=NOW)
            raise Killed()
    assert await _tickets(rt, world.team) == {} and await _rejections(rt, task.id) == []
    first = await _apply(rt, task, MIXED)
    report = await _rejections(rt, task.id)
    again = await _apply(rt, task, MIXED)  # a re-run after the commit
    assert first.as_dict() == {"created": 2, "updated": 0, "unchanged": 0, "rejected": 5}
    assert again.as_dict() == {"created": 0, "updated": 0, "unchanged": 2, "rejected": 5}
    assert await _rejections(rt, task.id) == report
    assert len(await _tickets(rt, world.team)) == 2


async def test_upsert_updates_title_status_priority_assignee_and_nothing_else(rt, world):
    first = await _task(rt, world, "upsert")
    await _apply(
        rt,
        first,
        (
            HEADER
            + "U-1,First,OPEN,LOW,chen@acme.test,lin@acme.test,2024-01-02T00:00:00Z\n"
            + "U-2,Same,OPEN,LOW,,,\n"
        ).encode(),
    )
    before = await _tickets(rt, world.team)
    later = datetime(2026, 12, 1, tzinfo=UTC)
    payload = import_batch.prepare(
        import_csv.parse(
            (
                HEADER
                + "U-1,Second,RESOLVED,HIGH,,zhou@acme.test,2025-05-05T00:00:00Z\n"
                + "U-2,Same,OPEN,LOW,,wang@acme.test,\n"
                + "U-3,New,,,,,\n"
            ).encode()
        ),
        first.team_id,
    )
    async with rt.engine.begin() as conn:
        counts = await import_apply.apply_batch(conn, first, payload, now=later)
    assert counts.as_dict() == {"created": 1, "updated": 1, "unchanged": 1, "rejected": 0}
    after = await _tickets(rt, world.team)
    u1 = after["U-1"]
    assert (u1.title, u1.status, u1.priority, u1.assignee_id) == (
        "Second",
        "RESOLVED",
        "HIGH",
        None,
    )
    assert (u1.creator_id, u1.created_at) == (before["U-1"].creator_id, before["U-1"].created_at)
    assert u1.updated_at == later
    assert after["U-2"] == before["U-2"], "an unchanged row is not written"
    assert (after["U-3"].status, after["U-3"].priority) == ("OPEN", "NORMAL")


async def test_the_report_does_not_depend_on_the_batch_size(rt, world):
    async def run(team, user, size):
        rt.settings = rt.settings.model_copy(update={"import_batch_rows": size})
        upload = await imports.store_upload(rt, user, team, "m.csv", MIXED)
        task = await imports.start_import(rt, user, team, upload.id, "create")
        assert await execute(rt, registry(), task.id, task.run) == "done"
        done = await tasks.get_task(rt, user, task.id)
        return done, await _rejections(rt, task.id)

    small, small_report = await run(world.team, world.admin, 2)
    big, big_report = await run(world.other_team, world.outsider, 1000)
    assert small.stats == {"created": 2, "updated": 0, "unchanged": 0, "rejected": 5}
    assert (small.progress_current, small.progress_total) == (7, 7)
    assert big.stats == {"created": 1, "updated": 0, "unchanged": 0, "rejected": 6}
    # Globex has neither Chen nor Lin: M-1 is rejected there, so compare the reader's part
    assert [r for r in small_report if r[0] != 2] == [r for r in big_report if r[0] != 2]
    assert (2, "assignee_email", "unknown assignee chen@acme.test") in big_report
    assert small_report[-1] == (8, "external_id", "duplicate of row 2")


def test_created_at_is_read_only_when_given_with_its_zone():
    data = (
        b"external_id,title,created_at\n"
        b"C-1,Given,2024-01-02T03:04:05Z\n"
        b"C-2,Empty,\n"
        b"C-3,Blank,   \n"
        b"C-4,No zone,2024-01-02T03:04:05\n"
        b"C-5,Not a time,yesterday\n"
    )
    got = {r.external_id: r.created_at for r in import_csv.parse(data)}
    assert got == {
        "C-1": datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        "C-2": None,
        "C-3": None,
        "C-4": None,
        "C-5": None,
    }


@pytest.mark.parametrize(
    ("mode", "counts", "title"),
    [
        ("create", {"created": 2, "updated": 0, "unchanged": 1, "rejected": 0}, "Theirs"),
        ("upsert", {"created": 2, "updated": 1, "unchanged": 0, "rejected": 0}, "Second"),
    ],
)
async def test_a_ticket_given_the_same_external_id_meanwhile_makes_the_batch_start_again(
    rt, world, monkeypatch, mode, counts, title
):
    task = await _task(rt, world, mode)
    checks = []
    existing = import_apply._existing

    async def check_then_someone_writes(cur, team_id, external_ids):
        found = await existing(cur, team_id, external_ids)
        checks.append(found)
        if len(checks) == 1:  # after the check, before the COPY: another connection commits R-2
            async with rt.engine.begin() as other:
                await other.execute(
                    sa.text(
                        "INSERT INTO ticket (team_id, external_id, title, creator_id) "
                        "VALUES (:t, 'R-2', 'Theirs', :c)"
                    ),
                    {"t": team_id, "c": world.staff},
                )
        return found

    monkeypatch.setattr(import_apply, "_existing", check_then_someone_writes)
    data = (HEADER + "R-1,First,,,,,\n" + "R-2,Second,,,,,\n" + "R-3,Third,,,,,\n").encode()
    got = await _apply(rt, task, data)
    assert checks == [set(), {"R-2"}], "the batch was rolled back and done again"
    assert got.as_dict() == counts
    tickets = await _tickets(rt, world.team)
    assert sorted(tickets) == ["R-1", "R-2", "R-3"] and tickets["R-2"].title == title
    async with rt.engine.connect() as conn:
        ids = (
            await conn.execute(
                sa.text("SELECT external_id FROM ticket WHERE team_id = :t ORDER BY id"),
                {"t": world.team},
            )
        ).scalars()
        assert [e for e in ids if e and e.startswith("R-")] == ["R-2", "R-1", "R-3"]


async def test_a_fresh_batch_that_meets_an_existing_ticket_is_done_again_with_the_check(
    rt, world, monkeypatch
):
    task = await _task(rt, world, "upsert")
    await _apply(rt, task, (HEADER + "F-2,Old,,,,,\n").encode())
    checks = []
    existing = import_apply._existing

    async def recorded(cur, team_id, external_ids):
        checks.append(await existing(cur, team_id, external_ids))
        return checks[-1]

    monkeypatch.setattr(import_apply, "_existing", recorded)
    data = (HEADER + "F-1,First,,,,,\n" + "F-2,New,,,,,\n" + "F-3,Third,,,,,\n").encode()
    payload = import_batch.prepare(import_csv.parse(data), task.team_id)
    async with rt.engine.begin() as conn:
        got = await import_apply.apply_batch(conn, task, payload, now=NOW, fresh=True)
    assert checks == [{"F-2"}], "unchecked first, then once with the check"
    assert got.as_dict() == {"created": 2, "updated": 1, "unchanged": 0, "rejected": 0}
    async with rt.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.text(
                    "SELECT external_id, title FROM ticket WHERE team_id = :t "
                    "AND external_id LIKE 'F-%' ORDER BY id"
                ),
                {"t": world.team},
            )
        ).all()
    assert [tuple(r) for r in rows] == [("F-2", "New"), ("F-1", "First"), ("F-3", "Third")]


async def test_a_rejection_in_a_column_whose_name_was_not_utf8_is_reported(rt, world):
    task = await _task(rt, world, "create")
    data = b"external_id,title,note\xff\nB-1,Fine,ok\nB-2,Bad,\x01\n"
    counts = await _apply(rt, task, data)
    assert counts.as_dict() == {"created": 1, "updated": 0, "unchanged": 0, "rejected": 1}
    assert await _rejections(rt, task.id) == [
        (3, "note?", "contains a control character (\\u0001); remove it")
    ]
