"""The conversation over GraphQL (schema/conversation.py, schema/types.py): replies, notes, a
status set with a reply, a customer's reply reopening, redaction (admins), retrying a failed
delivery (staff), files by upload id, paging a thread and its history, and bad input answered
with typed results or coded errors — never a 500."""

from __future__ import annotations

import io
from typing import Any

import sqlalchemy as sa

from desk.helpdesk import tickets
from desk.work import conversation
from tests.schema.scene import fail_task

POSTED = """__typename
  ... on MessagePosted {
    ticketMessage { id internal body author { displayName } attachments { id filename contentType size
      isImage downloadUrl } deliveries { state recipientName recipient { id } taskId } }
    ticket { id status }
    changes { field from to actor { id } }
  }
  ... on ValidationProblem { field message }
  ... on TooLarge { field message }
  ... on Problem { message }"""
REPLY = f"""mutation($t: ID!, $b: String!, $s: TicketStatus, $a: [ID!]) {{
  replyToTicket(ticketId: $t, body: $b, setStatus: $s, attachmentIds: $a) {{ {POSTED} }} }}"""
NOTE = f"""mutation($t: ID!, $b: String!, $a: [ID!]) {{
  addInternalNote(ticketId: $t, body: $b, attachmentIds: $a) {{ {POSTED} }} }}"""
MESSAGE = """__typename
  ... on TicketMessage { id body redactedAt redactedBy { id } attachments { id }
    deliveries { state serverReply attempts } }
  ... on Problem { message }"""
REDACT = f"mutation($id: ID!) {{ redactMessage(id: $id) {{ {MESSAGE} }} }}"
RETRY = f"""mutation($id: ID!) {{ retryMessageDelivery(id: $id) {{ {MESSAGE}
  ... on ValidationProblem {{ field }} }} }}"""
THREAD = """query($id: ID!, $first: Int, $after: String, $last: Int, $before: String) {
  ticket(id: $id) { messages(first: $first, after: $after, last: $last, before: $before) {
    edges { cursor node { id body internal } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }"""


class Bytes:
    """An upload's bytes, read as Starlette's UploadFile reads them."""

    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)

    async def read(self, size: int = -1) -> bytes:
        return self.buf.read(size)


async def upload(rt: Any, user: int, team: int, name: str, data: bytes) -> int:
    """Step one of the two-step upload (what POST /api/v1/uploads does): a staged file's id."""
    staged = await conversation.stage_upload(
        rt, user, team, conversation.IncomingFile(name, Bytes(data))
    )
    return staged.id


async def reply(api: Any, user: int, ticket: int, body: str, **more: Any) -> dict[str, Any]:
    variables = {"t": ticket, "b": body, **more}
    answer = await api(REPLY, variables, user=user)
    assert "errors" not in answer, answer
    return answer["data"]["replyToTicket"]  # type: ignore[no-any-return]


async def note(api: Any, user: int, ticket: int, body: str, **more: Any) -> dict[str, Any]:
    answer = await api(NOTE, {"t": ticket, "b": body, **more}, user=user)
    assert "errors" not in answer, answer
    return answer["data"]["addInternalNote"]  # type: ignore[no-any-return]


async def bodies(api: Any, user: int, ticket: int) -> list[str]:
    answer = await api(THREAD, {"id": ticket}, user=user)
    assert "errors" not in answer, answer
    edges = answer["data"]["ticket"]["messages"]["edges"]
    return [e["node"]["body"] for e in edges]


async def test_a_customer_reply_reaches_the_thread_and_reopens_a_resolved_ticket(api, world):
    posted = await reply(api, world.customer, world.tickets["resolved"], "It broke again")
    assert posted["__typename"] == "MessagePosted"
    assert posted["ticketMessage"]["body"] == "It broke again"
    assert posted["ticketMessage"]["author"] == {"displayName": "Customer"}
    assert posted["ticketMessage"]["deliveries"] == []  # a customer never sees deliveries
    assert posted["ticket"]["status"] == "OPEN"
    assert posted["changes"] == [
        {"field": "STATUS", "from": "RESOLVED", "to": "OPEN", "actor": {"id": str(world.customer)}}
    ]
    assert await bodies(api, world.staff, world.tickets["resolved"]) == ["It broke again"]


async def test_staff_reply_sets_a_status_and_shows_its_delivery(api, world):
    ticket = world.tickets["login"]
    posted = await reply(api, world.staff, ticket, "Fixed, try now", s="PENDING")
    assert posted["ticket"]["status"] == "PENDING"
    assert [(c["field"], c["from"], c["to"]) for c in posted["changes"]] == [
        ("STATUS", "OPEN", "PENDING")
    ]
    (mail,) = posted["ticketMessage"]["deliveries"]  # to the ticket's customer
    assert (mail["state"], mail["recipientName"], mail["recipient"]) == (
        "SENDING", "Customer", {"id": str(world.customer)},
    )  # fmt: skip
    # The same status again changes nothing; a customer may not set one.
    again = await reply(api, world.staff, ticket, "Still pending", s="PENDING")
    assert again["ticket"]["status"] == "PENDING" and again["changes"] == []
    refused = await reply(api, world.customer, ticket, "Close it", s="CLOSED")
    assert refused["__typename"] == "NotAllowed"
    # The customer's reply (no status of their own) reopens the pending ticket.
    back = await reply(api, world.customer, ticket, "Still broken")
    assert back["ticket"]["status"] == "OPEN"


async def test_a_note_is_staff_only(api, world):
    ticket = world.tickets["login"]
    await reply(api, world.customer, ticket, "Help")
    posted = await note(api, world.staff, ticket, "Customer is on the old client")
    assert posted["__typename"] == "MessagePosted"
    assert (
        posted["ticketMessage"]["internal"] is True and posted["ticketMessage"]["deliveries"] == []
    )
    assert await bodies(api, world.admin, ticket) == ["Help", "Customer is on the old client"]
    assert await bodies(api, world.customer, ticket) == ["Help"]
    refused = await note(api, world.customer, ticket, "let me in")
    assert refused["__typename"] == "NotAllowed"
    assert await bodies(api, world.staff, ticket) == ["Help", "Customer is on the old client"]


async def test_files_by_upload_id(api, rt, world):
    ticket = world.tickets["login"]
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10
    mine = await upload(rt, world.customer, world.team, "../shot.png", png)
    posted = await reply(api, world.customer, ticket, "", a=[str(mine)])  # a file, no text
    (file,) = posted["ticketMessage"]["attachments"]
    assert file == {
        "id": str(mine), "filename": "shot.png", "contentType": "image/png", "size": len(png),
        "isImage": True, "downloadUrl": f"/attachments/{mine}",
    }  # fmt: skip
    # Used once: the same id again is no longer an upload waiting for a message.
    again = await reply(api, world.customer, ticket, "again", a=[str(mine)])
    assert (again["__typename"], again["field"]) == ("ValidationProblem", "attachmentIds")


async def test_redaction_is_for_admins(api, world):
    ticket = world.tickets["login"]
    posted = await reply(api, world.customer, ticket, "my password is hunter2")
    message = posted["ticketMessage"]["id"]
    for who in (world.staff, world.customer):
        answer = await api(REDACT, {"id": message}, user=who)
        assert "errors" not in answer, answer
        assert answer["data"]["redactMessage"]["__typename"] == "NotAllowed", who
    done = (await api(REDACT, {"id": message}, user=world.admin))["data"]["redactMessage"]
    assert done["__typename"] == "TicketMessage"
    assert (done["body"], done["redactedBy"]) == ("", {"id": str(world.admin)})
    assert done["redactedAt"] is not None
    assert await bodies(api, world.customer, ticket) == [""]
    again = (await api(REDACT, {"id": message}, user=world.admin))["data"]["redactMessage"]
    assert again["redactedAt"] == done["redactedAt"]  # redacting again changes nothing
    outsider = (await api(REDACT, {"id": message}, user=world.outsider))["data"]["redactMessage"]
    missing = (await api(REDACT, {"id": "999999"}, user=world.admin))["data"]["redactMessage"]
    assert outsider == missing == {"__typename": "NotFound", "message": "Message not found."}


async def _email_tasks(rt: Any, message_id: int) -> list[int]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT task_id FROM message_email WHERE message_id = :m ORDER BY task_id"),
            {"m": message_id},
        )
        return [r.task_id for r in rows]


async def test_retrying_a_failed_delivery_is_for_staff(api, rt, world):
    posted = await reply(api, world.staff, world.tickets["login"], "Any news?")
    message = posted["ticketMessage"]["id"]
    nothing = (await api(RETRY, {"id": message}, user=world.staff))["data"]
    assert nothing["retryMessageDelivery"]["__typename"] == "ValidationProblem"
    assert nothing["retryMessageDelivery"]["field"] == "message"
    (task,) = await _email_tasks(rt, int(message))
    await fail_task(rt, task)
    failed = await api(f"query {{ ticket(id: {world.tickets['login']}) {{ messages {{ nodes {{ "
                       "deliveries { state serverReply } } } } }", user=world.staff)  # fmt: skip
    (shown,) = failed["data"]["ticket"]["messages"]["nodes"]
    assert shown["deliveries"] == [{"state": "FAILED", "serverReply": "boom"}]
    refused = (await api(RETRY, {"id": message}, user=world.customer))["data"]
    assert refused["retryMessageDelivery"]["__typename"] == "NotAllowed"
    done = (await api(RETRY, {"id": message}, user=world.admin))["data"]["retryMessageDelivery"]
    assert done["__typename"] == "TicketMessage"
    assert [d["state"] for d in done["deliveries"]] == ["SENDING"]


async def test_bad_input_is_a_typed_answer(make_api, rt, world):
    ticket = world.tickets["login"]
    async with make_api(message_max_files=2, message_max_bytes=2048) as api:
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"b": "  \n  "}, "ValidationProblem", "body"),
            ({"b": "a\x00b"}, "ValidationProblem", "body"),
            ({"b": "x" * 60_000 + "\x01"}, "ValidationProblem", "body"),
            ({"b": "hi", "s": "CLOSED"}, "MessagePosted", ""),  # staff: fine
            ({"b": "hi", "a": ["1", "2", "3"]}, "TooLarge", "files"),
            ({"b": "hi", "a": ["not-an-id"]}, "ValidationProblem", "attachmentIds"),
            ({"b": "hi", "a": ["99999999999"]}, "ValidationProblem", "attachmentIds"),
        ]
        theirs = await upload(rt, world.customer, world.team, "a.txt", b"customer's")
        cases.append(({"b": "hi", "a": [str(theirs)]}, "ValidationProblem", "attachmentIds"))
        big = [
            await upload(rt, world.staff, world.team, f"{i}.bin", b"\x00" * 1500) for i in (1, 2)
        ]
        cases.append(({"b": "hi", "a": [str(i) for i in big]}, "TooLarge", "files"))
        for variables, typename, field in cases:
            answer = await api(REPLY, {"t": ticket, **variables}, user=world.staff)
            result = answer["data"]["replyToTicket"]
            assert result["__typename"] == typename, (variables, result)
            assert result.get("field", "") == field, result
        # The refused posts left nothing: one reply (the CLOSED one), and the files still staged.
        assert await bodies(api, world.staff, ticket) == ["hi"]
        for ticket_id in ("abc", "0", "99999999"):
            answer = await api(REPLY, {"t": ticket_id, "b": "hi"}, user=world.staff)
            assert answer["data"]["replyToTicket"]["__typename"] == "NotFound"


async def test_paging_a_thread_both_ways(api, rt, world):
    ticket = world.tickets["login"]
    for i in range(5):
        await conversation.post_message(rt, world.customer, ticket, f"m{i}")

    async def page(**args: Any) -> dict[str, Any]:
        answer = await api(THREAD, {"id": ticket, **args}, user=world.customer)
        assert "errors" not in answer, answer
        return answer["data"]["ticket"]["messages"]  # type: ignore[no-any-return]

    def said(p: dict[str, Any]) -> list[str]:
        return [e["node"]["body"] for e in p["edges"]]

    first = await page(first=2)
    assert said(first) == ["m0", "m1"]
    assert (first["pageInfo"]["hasNextPage"], first["pageInfo"]["hasPreviousPage"]) == (True, False)
    rest = await page(first=10, after=first["pageInfo"]["endCursor"])
    assert said(rest) == ["m2", "m3", "m4"] and rest["pageInfo"]["hasNextPage"] is False
    newest = await page(last=2)
    assert said(newest) == ["m3", "m4"] and newest["pageInfo"]["hasPreviousPage"] is True
    older = await page(last=2, before=newest["pageInfo"]["startCursor"])
    assert said(older) == ["m1", "m2"] and older["pageInfo"]["hasNextPage"] is True
    assert newest["edges"][0]["cursor"] == newest["pageInfo"]["startCursor"]


async def test_bad_page_arguments_are_validation_errors(api, world):
    ticket = world.tickets["login"]
    history = "query($id: ID!, $after: String) { ticket(id: $id) { history(after: $after) { nodes { id } } } }"
    cases = [
        (THREAD, {"first": 0}, "first"),
        (THREAD, {"first": 201}, "first"),
        (THREAD, {"last": 0}, "last"),
        (THREAD, {"after": "nope"}, "after"),
        (THREAD, {"before": "bTp4"}, "before"),  # "m:x": not an id
        (THREAD, {"after": "aDox"}, "after"),  # "h:1", a history cursor, is not a message's
        (history, {"after": "bTox"}, "after"),  # and "m:1" not a history entry's
    ]
    for query, args, field in cases:
        answer = await api(query, {"id": ticket, **args}, user=world.staff)
        (error,) = answer["errors"]
        assert error["extensions"] == {"code": "VALIDATION", "field": field}, (args, error)


async def test_history_names_the_people(api, rt, world):
    ticket = world.tickets["printer"]
    await tickets.update_ticket(rt, world.admin, ticket, assignee_id=world.staff)
    await tickets.update_ticket(rt, world.staff, ticket, priority="HIGH", title="Printer smoking")
    query = """query($id: ID!, $after: String) { ticket(id: $id) { history(first: 2, after: $after) {
      edges { cursor node { field from to actor { displayName } fromUser { id } toUser { displayName } } }
      pageInfo { hasNextPage endCursor } } } }"""
    answer = await api(query, {"id": ticket}, user=world.customer2)
    page = answer["data"]["ticket"]["history"]
    nodes = [e["node"] for e in page["edges"]]
    assert nodes[0] == {
        "field": "ASSIGNEE", "from": None, "to": str(world.staff), "actor": {"displayName": "Admin"},
        "fromUser": None, "toUser": {"displayName": "Staff"},
    }  # fmt: skip
    assert (nodes[1]["field"], nodes[1]["from"], nodes[1]["to"], nodes[1]["toUser"]) == (
        "PRIORITY", "URGENT", "HIGH", None,
    )  # fmt: skip
    assert page["pageInfo"]["hasNextPage"] is True
    more = await api(
        query, {"id": ticket, "after": page["pageInfo"]["endCursor"]}, user=world.admin
    )
    (last,) = more["data"]["ticket"]["history"]["edges"]
    assert (last["node"]["field"], last["node"]["to"]) == ("TITLE", "Printer smoking")
