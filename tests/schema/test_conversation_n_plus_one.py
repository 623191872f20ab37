"""A list of tickets with their threads and history loads in batches (the `threads` and
`histories` loaders, desk/reads/threads.py): the number of SQL statements does not grow with the
number of tickets, nor of messages, files or e-mails."""

from __future__ import annotations

from typing import Any

from desk.helpdesk import tickets
from desk.work import conversation
from tests.counting import engine_statements as counting
from tests.factories import add_ticket
from tests.schema.test_conversation import upload

THREADS = """query($t: ID!, $n: Int!) { tickets(teamId: $t, first: $n) { edges { node {
  title
  messages(first: 10) { edges { cursor node {
    body internal author { displayName } redactedBy { id } ticket { title }
    attachments { filename downloadUrl }
    deliveries { state recipient { displayName } }
  } } pageInfo { hasPreviousPage } }
  history(first: 10) { nodes { field actor { displayName } fromUser { id } toUser { displayName } } }
} } } }"""


async def _threads(rt: Any, world: Any, n: int) -> None:
    """n tickets, each with replies both ways (mailed), a note, a file and a change."""
    for i in range(n):
        ticket = await add_ticket(rt, world.team, world.customer, f"thread {i}")
        file = await upload(rt, world.customer, world.team, f"{i}.txt", b"log line\n")
        await conversation.post_message(
            rt, world.customer, ticket, f"ask {i}", attachment_ids=[file]
        )
        await conversation.post_message(rt, world.staff, ticket, "answer", set_status="PENDING")
        await conversation.post_message(rt, world.admin, ticket, "note", internal=True)
        await tickets.update_ticket(rt, world.admin, ticket, assignee_id=world.staff)


async def _statements(api: Any, team: int, user: int, n: int) -> list[str]:
    with counting(api.rt.engine) as statements:
        body = await api(THREADS, {"t": team, "n": n}, user=user)
    assert "errors" not in body, body
    edges = body["data"]["tickets"]["edges"]
    assert len(edges) == n
    return statements


async def test_tickets_with_their_threads_cost_the_same_for_few_and_many(
    make_api, rt, world
) -> None:
    await _threads(rt, world, 12)
    # Statements are counted here, not the estimate (files and e-mails count 20 each in it).
    async with make_api(graphql_max_cost=100_000) as api:
        for user in (world.staff, world.customer):
            few = await _statements(api, world.team, user, 2)
            many = await _statements(api, world.team, user, 12)
            # threads (readers, messages, files, deliveries), history (readers, entries), the
            # messages' tickets, and people in at most three batches: they are asked for at
            # three depths (authors, recipients, the history's people), which the loader may
            # or may not gather in one tick. The ticket page itself goes by the hot pool.
            assert len(few) <= 10 and len(many) <= 10, (few, many)


async def test_what_the_batch_shows_is_what_one_ticket_shows(api, rt, world) -> None:
    await _threads(rt, world, 3)
    one = "query($id: ID!) { ticket(id: $id) { messages { nodes { body attachments { filename } } } } }"
    listed = await api(THREADS, {"t": world.team, "n": 3}, user=world.customer)
    for edge in listed["data"]["tickets"]["edges"]:
        bodies = [e["node"]["body"] for e in edge["node"]["messages"]["edges"]]
        assert bodies[-1] == "answer" and "note" not in bodies  # a customer: no note, anywhere
    staff = await api(THREADS, {"t": world.team, "n": 3}, user=world.staff)
    node = staff["data"]["tickets"]["edges"][0]["node"]
    assert [e["node"]["internal"] for e in node["messages"]["edges"]] == [False, False, True]
    (delivery,) = node["messages"]["edges"][1]["node"]["deliveries"]
    assert delivery["recipient"] == {"displayName": "Customer"}
    assert [h["field"] for h in node["history"]["nodes"]] == ["STATUS", "ASSIGNEE"]
    ticket_id = (await api("query($t: ID!) { tickets(teamId: $t, first: 1) { nodes { id } } }",
                           {"t": world.team}, user=world.staff))["data"]["tickets"]["nodes"][0]["id"]  # fmt: skip
    single = await api(one, {"id": ticket_id}, user=world.staff)
    shown = single["data"]["ticket"]["messages"]["nodes"]
    assert [m["body"] for m in shown] == [e["node"]["body"] for e in node["messages"]["edges"]]
    assert shown[0]["attachments"] == [{"filename": "2.txt"}]
