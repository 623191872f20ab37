"""An export's conversation columns: message_count (public messages, the opening one included),
first_response_at (the first public reply by staff other than the ticket's creator) and
last_public_reply_at (the latest public message after the opening one). Internal notes count
for none of them, so a customer's export (or anyone's) says nothing about notes."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import psycopg
import sqlalchemy as sa

from desk.helpdesk import tickets
from desk.work import conversation, exports, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import add_ticket

NEW = ("message_count", "first_response_at", "last_public_reply_at")


def iso(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _export(rt, user: int, team: int, filters=None) -> tuple[bytes, dict[int, dict]]:
    task = await tasks.create_export(rt, user, team, filters or {})
    assert await execute(rt, registry(), task.id, task.run) == "done"
    f = await tasks.open_export_result(rt, user, task.id)
    data = b"".join([c async for c in f.chunks])
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"))))
    return data, {int(r["id"]): r for r in rows}


def _new(row: dict) -> tuple[str, str, str]:
    return row["message_count"], row["first_response_at"], row["last_public_reply_at"]


async def test_the_header_names_the_conversation_columns_after_updated_at(rt, world) -> None:
    data, _ = await _export(rt, world.staff, world.team)
    assert exports.COLUMNS[8:11] == NEW  # then the SLA columns (test_export_sla_columns.py)
    assert data.startswith(exports.HEADER)
    assert b",updated_at,message_count,first_response_at,last_public_reply_at," in exports.HEADER


async def test_replies_set_the_columns_and_notes_change_nothing(rt, world, clock) -> None:
    t0 = clock()
    ticket = await tickets.create_ticket(rt, world.customer, world.team, "VPN drops", "Every hour")
    only_opening = await tickets.create_ticket(rt, world.customer, world.team, "Quiet", "Hello")
    noted = await tickets.create_ticket(rt, world.customer, world.team, "Noted", "Hello")
    _, before = await _export(rt, world.customer, world.team)
    assert _new(before[ticket.id]) == _new(before[only_opening.id]) == ("1", "", "")

    clock.advance(60)
    await conversation.post_message(rt, world.staff, ticket.id, "Checking", internal=True)
    await conversation.post_message(rt, world.staff, noted.id, "Looks like spam", internal=True)
    clock.advance(60)
    t_reply = clock()
    await conversation.post_message(rt, world.staff, ticket.id, "Try the new client")
    clock.advance(60)
    t_customer = clock()
    await conversation.post_message(rt, world.customer, ticket.id, "Still drops")
    clock.advance(60)
    await conversation.post_message(
        rt, world.admin, ticket.id, "Escalated to network", internal=True
    )
    await conversation.post_message(rt, world.admin, noted.id, "Another note", internal=True)

    _, customer = await _export(rt, world.customer, world.team)
    assert _new(customer[ticket.id]) == ("3", iso(t_reply), iso(t_customer))
    assert _new(customer[only_opening.id]) == ("1", "", "")
    # A ticket with notes only reads exactly as before them, every cell.
    assert customer[noted.id] == before[noted.id]
    assert customer[only_opening.id] == before[only_opening.id]
    # Staff, who read the notes, get the same figures: public messages only, for everyone.
    _, staff = await _export(rt, world.staff, world.team)
    for tid in (ticket.id, only_opening.id, noted.id):
        assert staff[tid] == customer[tid]
    assert t0 < t_reply


async def test_first_response_is_by_staff_other_than_the_creator(rt, world, clock) -> None:
    by_customer = await tickets.create_ticket(rt, world.customer, world.team, "Mine", "Hi")
    by_staff = await tickets.create_ticket(rt, world.staff, world.team, "For a caller", "Phoned")
    clock.advance(30)
    customer_reply = clock()
    await conversation.post_message(rt, world.customer, by_customer.id, "Anyone?")
    await conversation.post_message(rt, world.staff, by_staff.id, "Called back, no answer")
    _, rows = await _export(rt, world.staff, world.team)
    # Neither a customer's own follow-up nor the creator's is a response.
    assert _new(rows[by_customer.id]) == ("2", "", iso(customer_reply))
    assert _new(rows[by_staff.id]) == ("2", "", iso(customer_reply))
    clock.advance(30)
    answer = clock()
    await conversation.post_message(rt, world.admin, by_staff.id, "I'll take it")
    await conversation.post_message(rt, world.staff, by_customer.id, "Here")
    clock.advance(30)
    await conversation.post_message(rt, world.staff, by_customer.id, "And again")
    _, rows = await _export(rt, world.staff, world.team)
    assert _new(rows[by_customer.id]) == ("4", iso(answer), iso(clock()))
    assert _new(rows[by_staff.id]) == ("3", iso(answer), iso(answer))


async def test_a_ticket_without_an_opening_message(rt, world, clock) -> None:
    """Imported tickets (and the factory's) have no opening message: nothing to count until a
    first reply, which then is a reply."""
    imported = await add_ticket(rt, world.team, world.customer, "Imported")
    _, rows = await _export(rt, world.staff, world.team)
    assert _new(rows[imported]) == ("0", "", "")
    clock.advance(5)
    await conversation.post_message(rt, world.staff, imported, "Picked up", internal=True)
    _, rows = await _export(rt, world.customer, world.team)
    assert _new(rows[imported]) == ("0", "", "")
    await conversation.post_message(rt, world.staff, imported, "On it")
    _, rows = await _export(rt, world.customer, world.team)
    assert _new(rows[imported]) == ("1", iso(clock()), iso(clock()))


async def test_the_columns_agree_with_the_messages(rt, world, clock) -> None:
    """The figures the ticket keeps equal what its messages say, computed here from
    ticket_message and the authors' roles; and the stored file is still COPY's, byte for byte."""
    made = []
    for i in range(6):
        creator = (world.customer, world.customer2)[i % 2]
        t = await tickets.create_ticket(rt, creator, world.team, f"Thread {i}", f"Opening {i}")
        made.append((t.id, creator))
    staff, admin, creator = world.staff, world.admin, None  # None: the ticket's creator
    posts = [
        (0, staff, False), (0, creator, False), (1, admin, True), (1, creator, False),
        (2, staff, True), (2, admin, False), (3, staff, False), (3, staff, True),
        (3, creator, False), (0, admin, False), (5, admin, True), (2, staff, False),
    ]  # fmt: skip
    for i, (n, author, internal) in enumerate(posts):
        clock.advance(7)
        tid, made_by = made[n]
        await conversation.post_message(
            rt, author or made_by, tid, f"Message {i}", internal=internal
        )
    data, rows = await _export(rt, world.staff, world.team)
    async with rt.engine.connect() as conn:
        truth = await conn.execute(
            sa.text(
                "SELECT t.id, count(m.id) FILTER (WHERE NOT m.internal) AS n, "
                " min(m.created_at) FILTER (WHERE NOT m.internal AND m.id > o.id "
                "  AND r.role <> 'CUSTOMER') AS first, "
                " max(m.created_at) FILTER (WHERE NOT m.internal AND m.id > o.id) AS last "
                "FROM ticket t JOIN LATERAL (SELECT min(id) AS id FROM ticket_message "
                " WHERE ticket_id = t.id) o ON true "
                "JOIN ticket_message m ON m.ticket_id = t.id "
                "LEFT JOIN membership r ON r.user_id = m.author_id AND r.team_id = t.team_id "
                "WHERE t.id = ANY(:ids) GROUP BY t.id"
            ),
            {"ids": [tid for tid, _ in made]},
        )
        expected = {r.id: (str(r.n), iso(r.first), iso(r.last)) for r in truth}
    assert len(expected) == len(made)
    assert {tid: _new(rows[tid]) for tid, _ in made} == expected
    assert any(first for _, first, _ in expected.values())
    assert any(not first and last for _, first, last in expected.values())
    # Every cell as COPY writes it, after the header.
    exported = await tasks.create_export(rt, world.staff, world.team, {"q": "Thread"})
    assert await execute(rt, registry(), exported.id, exported.run) == "done"
    f = await tasks.open_export_result(rt, world.staff, exported.id)
    stored = b"".join([c async for c in f.chunks])
    sql, params = exports.copy_sql(await tasks.get_task(rt, world.staff, exported.id))
    async with await psycopg.AsyncConnection.connect(rt.settings.libpq_url, autocommit=True) as c:
        buf = bytearray()
        async with c.cursor().copy(sql, params) as copy:
            async for chunk in copy:
                buf += chunk
    assert stored == exports.HEADER + bytes(buf)
    assert stored.count(b"\n") == 1 + len(made)
    assert data.count(b"\n") == 1 + len(rows)
