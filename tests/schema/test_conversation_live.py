"""`ticketUpdated` (schema/ticket_live.py) over the transports the app serves, against a real
uvicorn and the real change feed: a customer's reply reaches a staff subscriber (then its
e-mail's failure, through the EMAIL task's notice), a note reaches staff but never the
customer's stream, `after` fills the gap between a query and the subscription, an outsider's
subscription gets exactly what a missing ticket gets, and losing sight of the ticket ends it."""

from __future__ import annotations

from typing import Any

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import members, users
from desk.work import conversation
from schema.types import cursor
from tests.factories import World
from tests.schema.scene import fail_task
from tests.schema.subscribing import Socket, listening, serve, socket
from tests.schema.test_subscriptions_sse import stream
from tests.sessions import cookie_header

FOLLOW = """subscription($id: ID!, $after: String) { ticketUpdated(id: $id, after: $after) {
  ticket { id status }
  messages { id body internal author { displayName } deliveries { state serverReply } }
  history { field from to }
} }"""


async def _token(rt: Runtime, user_id: int) -> str:
    return (await users.create_token(rt, user_id, "live"))[1]


async def _update(s: Socket, op: str) -> dict[str, Any]:
    payload = await s.next(op)
    assert "errors" not in payload, payload
    return payload["data"]["ticketUpdated"]  # type: ignore[no-any-return]


async def test_a_customer_reply_reaches_staff_and_so_does_its_delivery(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    ticket = world.tickets["resolved"]
    token = await _token(rt, world.staff)
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        op = await s.subscribe(FOLLOW, {"id": str(ticket)})
        first = await _update(s, op)
        assert first == {"ticket": {"id": str(ticket), "status": "RESOLVED"}, "messages": [],
                             "history": []}  # fmt: skip
        await listening(served, 1)
        posted = await conversation.post_message(rt, world.customer, ticket, "Broken again")
        got = await _update(s, op)
        assert got["ticket"]["status"] == "OPEN"
        assert got["history"] == [{"field": "STATUS", "from": "RESOLVED", "to": "OPEN"}]
        (message,) = got["messages"]
        assert (message["body"], message["author"]) == (
            "Broken again",
            {"displayName": "Customer"},
        )
        assert message["deliveries"] == [{"state": "SENDING", "serverReply": None}]  # to Chen
        # The e-mail fails (as the worker records it): its task's notice wakes the stream.
        (task,) = posted.email_task_ids
        await fail_task(rt, task)
        failed = await _update(s, op)
        assert [m["id"] for m in failed["messages"]] == [message["id"]]
        assert failed["messages"][0]["deliveries"] == [{"state": "FAILED", "serverReply": "boom"}]
        assert failed["history"] == []


async def test_a_note_reaches_staff_and_never_the_customer(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    ticket = world.tickets["login"]
    async with (
        serve(settings, clock) as served,
        socket(served, token=await _token(rt, world.staff)) as staff,
        socket(served, token=await _token(rt, world.customer)) as customer,
    ):
        staff_op = await staff.subscribe(FOLLOW, {"id": str(ticket)})
        customer_op = await customer.subscribe(FOLLOW, {"id": str(ticket)})
        assert (await _update(staff, staff_op))["messages"] == []
        assert (await _update(customer, customer_op))["messages"] == []
        await listening(served, 2)
        await conversation.post_message(rt, world.staff, ticket, "VIP: be nice", internal=True)
        noted = await _update(staff, staff_op)
        assert [(m["body"], m["internal"]) for m in noted["messages"]] == [("VIP: be nice", True)]
        await conversation.post_message(rt, world.staff, ticket, "We are on it")
        # Events come in order: the customer's next is the reply, so the note sent nothing.
        replied = await _update(customer, customer_op)
        assert [(m["body"], m["internal"]) for m in replied["messages"]] == [
            ("We are on it", False)
        ]
        assert replied["messages"][0]["deliveries"] == []  # deliveries are staff's
        seen = await _update(staff, staff_op)
        assert [m["body"] for m in seen["messages"]] == ["We are on it"]


async def test_an_outsider_gets_what_a_missing_ticket_gets(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    answers = []
    async with serve(settings, clock) as served:
        for user, ticket in [
            (world.outsider, world.tickets["login"]),  # another team's
            (world.customer2, world.tickets["login"]),  # another customer's
            (world.outsider, 999_999),  # missing
            (world.outsider, "not-an-id"),
        ]:
            async with socket(served, token=await _token(rt, user)) as s:
                answers.append(
                    await s.until_complete(await s.subscribe(FOLLOW, {"id": str(ticket)}))
                )
    assert answers == [[{"data": {"ticketUpdated": None}}]] * 4


async def test_after_fills_the_gap_over_an_event_stream(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """The customer read the thread up to `m1`; `m2` came before they subscribed: the first
    event brings it. Then a staff reply is pushed (server-sent events, session cookie)."""
    ticket = world.tickets["login"]
    m1 = await conversation.post_message(rt, world.customer, ticket, "m1")
    await conversation.post_message(rt, world.staff, ticket, "hidden", internal=True)
    await conversation.post_message(rt, world.customer, ticket, "m2")
    variables = {"id": str(ticket), "after": cursor("m", m1.message.id)}
    headers = {"Cookie": cookie_header(settings, world.customer)}
    async with (
        serve(settings, clock) as served,
        stream(served, FOLLOW, variables, headers=headers) as events,
    ):
        event, data = await events.event()
        assert event == "next"
        assert [m["body"] for m in data["data"]["ticketUpdated"]["messages"]] == ["m2"]
        await listening(served, 1)
        await conversation.post_message(rt, world.staff, ticket, "m3", set_status="PENDING")
        event, data = await events.event()
        update = data["data"]["ticketUpdated"]
        assert [m["body"] for m in update["messages"]] == ["m3"]
        assert (update["ticket"]["status"], update["history"]) == (
            "PENDING", [{"field": "STATUS", "from": "OPEN", "to": "PENDING"}],
        )  # fmt: skip


async def test_losing_sight_of_the_ticket_ends_the_stream_as_missing(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """Visibility is read again on every event: staff made a customer no longer see another
    customer's ticket — the stream sends `null` and ends, as for a missing ticket."""
    ticket = world.tickets["printer"]  # Wang's
    async with (
        serve(settings, clock) as served,
        socket(served, token=await _token(rt, world.staff)) as s,
    ):
        op = await s.subscribe(FOLLOW, {"id": str(ticket)})
        assert (await _update(s, op))["ticket"]["id"] == str(ticket)
        await listening(served, 1)
        await members.change_role(rt, world.admin, world.team, world.staff, "CUSTOMER")
        assert await s.until_complete(op) == [{"data": {"ticketUpdated": None}}]
