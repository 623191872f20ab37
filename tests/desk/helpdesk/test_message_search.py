"""Search reads the conversation too: `q` matches a ticket's title or one of its messages, any
message for staff, public ones only for a customer (a word only in an internal note never finds
a ticket for them), never a redacted one, each ticket once; the list, GraphQL and exports alike."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator

import httpx
import pytest
import sqlalchemy as sa

from api.app import create_app
from desk.helpdesk import tickets
from desk.helpdesk.filters import like_pattern, parse_filter
from desk.work import conversation, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.schema.conftest import Api


async def _found(rt, user: int, team: int, q: str) -> set[int]:
    page = await tickets.list_tickets(rt, user, team, parse_filter({"q": q}))
    ids = [t.id for t in page.items]
    assert len(ids) == len(set(ids)) == page.total, (q, ids, page.total)  # each ticket once
    return set(ids)


@pytest.fixture
async def thread(rt, world: World) -> dict[str, int]:
    """The customer's ticket with a staff reply, a note and a reply of theirs; the other
    customer's ticket with a public reply holding the same words."""
    mine = await tickets.create_ticket(
        rt, world.customer, world.team, "Screen flickers", "Since Monday"
    )
    theirs = await tickets.create_ticket(rt, world.customer2, world.team, "Keyboard", "Sticky keys")
    await conversation.post_message(rt, world.staff, mine.id, "Please update the graphics driver")
    await conversation.post_message(
        rt, world.staff, mine.id, "Vendor escalation: suspect firmware bug", internal=True
    )
    await conversation.post_message(rt, world.customer, mine.id, "我已经申请退款了")
    await conversation.post_message(
        rt, world.staff, theirs.id, "Graphics driver? No, firmware. 退款 possible"
    )
    return {"mine": mine.id, "theirs": theirs.id}


async def test_staff_find_a_ticket_by_a_word_only_in_a_reply(rt, world, thread) -> None:
    assert await _found(rt, world.staff, world.team, "graphics DRIVER") == {
        thread["mine"],
        thread["theirs"],
    }
    assert await _found(rt, world.staff, world.team, "Monday") == {thread["mine"]}  # the opening
    # Staff read notes, so their search does too.
    assert await _found(rt, world.staff, world.team, "escalation") == {thread["mine"]}
    assert await _found(rt, world.admin, world.team, "escalation") == {thread["mine"]}


async def test_a_customer_finds_public_replies_but_never_a_note(rt, world, thread) -> None:
    assert await _found(rt, world.customer, world.team, "graphics driver") == {thread["mine"]}
    assert await _found(rt, world.customer, world.team, "Monday") == {thread["mine"]}
    # Only in the note on their ticket (and in a public reply on someone else's): nothing.
    assert await _found(rt, world.customer, world.team, "escalation") == set()
    assert await _found(rt, world.customer, world.team, "suspect firmware") == set()
    assert await _found(rt, world.customer, world.team, "firmware") == set()
    # The word is also in a public message of theirs: found, as that message says it.
    await conversation.post_message(rt, world.staff, thread["mine"], "Firmware 2.1 is out")
    assert await _found(rt, world.customer, world.team, "firmware") == {thread["mine"]}
    assert await _found(rt, world.customer, world.team, "escalation") == set()


async def test_chinese_words_in_messages_are_found(rt, world, thread) -> None:
    assert await _found(rt, world.staff, world.team, "退款") == {thread["mine"], thread["theirs"]}
    assert await _found(rt, world.customer, world.team, "退款") == {thread["mine"]}
    assert await _found(rt, world.customer2, world.team, "退款") == {thread["theirs"]}
    assert await _found(rt, world.customer, world.team, "申请退款") == {thread["mine"]}
    assert await _found(rt, world.customer, world.team, "退货") == set()


async def test_another_customers_or_teams_ticket_is_never_found(rt, world, thread) -> None:
    assert await _found(rt, world.customer, world.team, "No, firmware") == set()
    assert await _found(rt, world.customer, world.team, "Sticky") == set()
    assert await _found(rt, world.customer2, world.team, "Sticky") == {thread["theirs"]}
    assert await _found(rt, world.customer2, world.team, "graphics") == {thread["theirs"]}
    assert await _found(rt, world.customer2, world.team, "Monday") == set()
    globex = await tickets.create_ticket(rt, world.outsider, world.other_team, "Globex", "x")
    await conversation.post_message(rt, world.outsider, globex.id, "graphics driver 退款")
    assert await _found(rt, world.staff, world.team, "graphics driver") == {
        thread["mine"],
        thread["theirs"],
    }
    assert await _found(rt, world.outsider, world.other_team, "退款") == {globex.id}


async def test_a_redacted_message_matches_nothing(rt, world) -> None:
    ticket = world.tickets["login"]
    posted = await conversation.post_message(rt, world.customer, ticket, "my password is hunter2")
    assert await _found(rt, world.staff, world.team, "hunter2") == {ticket}
    await conversation.redact_message(rt, world.admin, posted.message.id)
    assert await _found(rt, world.staff, world.team, "hunter2") == set()
    assert await _found(rt, world.customer, world.team, "hunter2") == set()


async def test_a_ticket_matching_many_times_comes_once(rt, world) -> None:
    ticket = await tickets.create_ticket(rt, world.customer, world.team, "Toner low", "toner toner")
    for i in range(3):
        await conversation.post_message(rt, world.staff, ticket.id, f"Toner ordered ({i})")
        await conversation.post_message(
            rt, world.staff, ticket.id, f"toner note {i}", internal=True
        )
    for user in (world.staff, world.customer):
        assert await _found(rt, user, world.team, "toner") == {ticket.id}


# Words with LIKE's and the bigram function's special cases, as tests/desk/helpdesk/test_search.py's.
WORDS = ("退款", "款", "invoice", "in", "i", "50%", "_", "promo_code", "\\", "C:\\temp", "🙂", "é")
BODIES = (
    "订单#42的退款还没有到账",
    "INVOICE #77 shows the wrong VAT",
    "50% off promo_code broken",
    "Path C:\\temp\\x fails",
    "Emoji 🙂 and Café",
    "in",
)


async def _truth(rt, team: int, q: str, *, notes: bool, creator: int | None) -> set[int]:
    """What plain ILIKE on titles and (not redacted) message bodies finds: no index involved."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT t.id FROM ticket t WHERE t.team_id = :t "
                "AND (CAST(:c AS int) IS NULL OR t.creator_id = :c) AND (t.title ILIKE :p "
                " OR EXISTS (SELECT 1 FROM ticket_message m WHERE m.ticket_id = t.id "
                "  AND m.body ILIKE :p AND m.redacted_at IS NULL AND (:notes OR NOT m.internal)))"
            ),
            {"t": team, "c": creator, "p": like_pattern(q), "notes": notes},
        )
        return {r.id for r in rows}


@pytest.mark.parametrize("q", WORDS)
async def test_every_word_finds_what_ilike_finds(rt, world, q) -> None:
    for i, body in enumerate(BODIES):
        creator = (world.customer, world.customer2)[i % 2]
        t = await tickets.create_ticket(rt, creator, world.team, f"Conversation {i}", "Hello")
        await conversation.post_message(rt, world.staff, t.id, body, internal=bool(i % 3 == 1))
    staff = await _truth(rt, world.team, q, notes=True, creator=None)
    assert await _found(rt, world.staff, world.team, q) == staff
    customer = await _truth(rt, world.team, q, notes=False, creator=world.customer)
    assert await _found(rt, world.customer, world.team, q) == customer
    assert customer <= staff


SEARCH = "query($t: ID!, $q: String) { tickets(teamId: $t, filter: {q: $q}) { nodes { id } totalCount } }"


@pytest.fixture
async def api(settings, clock) -> AsyncIterator[Api]:
    """The app behind an in-process client, as tests/schema's `api` fixture."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Api(app, client)


async def test_graphql_tickets_search_the_conversation(api: Api, world, thread) -> None:
    async def ids(user: int, q: str) -> set[int]:
        got = await api(SEARCH, {"t": str(world.team), "q": q}, user=user)
        assert "errors" not in got, got
        nodes = got["data"]["tickets"]["nodes"]
        assert got["data"]["tickets"]["totalCount"] == len(nodes)
        return {int(n["id"]) for n in nodes}

    assert await ids(world.staff, "escalation") == {thread["mine"]}
    assert await ids(world.customer, "escalation") == set()
    assert await ids(world.customer, "graphics") == {thread["mine"]}
    assert await ids(world.customer, "退款") == {thread["mine"]}


async def _exported(rt, user: int, team: int, q: str) -> list[list[str]]:
    task = await tasks.create_export(rt, user, team, {"q": q})
    assert await execute(rt, registry(), task.id, task.run) == "done"
    f = await tasks.open_export_result(rt, user, task.id)
    data = b"".join([c async for c in f.chunks])
    return list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))[1:]


async def test_exports_search_the_conversation(rt, world, thread) -> None:
    assert [r[0] for r in await _exported(rt, world.staff, world.team, "escalation")] == [
        str(thread["mine"])
    ]
    assert await _exported(rt, world.customer, world.team, "escalation") == []
    assert [r[0] for r in await _exported(rt, world.customer, world.team, "driver")] == [
        str(thread["mine"])
    ]
    assert [r[0] for r in await _exported(rt, world.customer2, world.team, "退款")] == [
        str(thread["theirs"])
    ]
