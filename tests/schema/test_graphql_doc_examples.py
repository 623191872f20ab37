"""docs/graphql.md's "Conversation" examples are true: each ```graphql block parses and is valid
for the served schema, and each one runs — through /graphql, on real data, as the people the text
says — with the answers the text promises (a note hidden from the customer, the two-step upload,
paging, delivery and its retry, redaction by admins only, the `ticketUpdated` stream)."""

from __future__ import annotations

import re
from typing import Any

from graphql import OperationDefinitionNode, parse, validate
from sqlalchemy import text

from desk.core.runtime import Runtime
from desk.people import users
from desk.work import conversation
from schema.root import build_schema
from tests.helpers import ROOT
from tests.schema.scene import fail_task
from tests.schema.subscribing import listening, serve, socket

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64  # sniffed as image/png


def _section(name: str) -> str:
    text = (ROOT / "docs" / "graphql.md").read_text()
    start = text.index(f"\n## {name}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _examples() -> dict[str, str]:
    """The section's ```graphql blocks, by their operation's name (one operation each)."""
    out = {}
    for block in re.findall(r"```graphql\n(.*?)```", _section("Conversation"), flags=re.S):
        (op,) = parse(block).definitions
        assert isinstance(op, OperationDefinitionNode) and op.name is not None, block
        out[op.name.value] = block
    return out


EXAMPLES = _examples()


def test_every_example_is_valid_for_the_schema() -> None:
    assert set(EXAMPLES) == {
        "Reply", "Note", "ReplyWithFiles", "Thread", "History", "Retry", "Redact", "Follow",
    }  # fmt: skip
    served = build_schema(prod=False)._schema
    for name, block in EXAMPLES.items():
        assert validate(served, parse(block)) == [], name


async def _token(rt: Runtime, user_id: int) -> str:
    return (await users.create_token(rt, user_id, "doc examples"))[1]


async def _run(api: Any, name: str, variables: dict[str, Any], user: int) -> dict[str, Any]:
    answer = await api(EXAMPLES[name], variables, user=user)
    assert "errors" not in answer, (name, answer)
    return answer["data"]  # type: ignore[no-any-return]


async def test_the_examples_do_what_the_text_says(api, rt, world) -> None:
    ticket = {"ticket": str(world.tickets["login"])}
    note = (await _run(api, "Note", ticket, world.staff))["addInternalNote"]
    assert note["__typename"] == "MessagePosted" and note["ticketMessage"]["internal"] is True
    refused = (await _run(api, "Note", ticket, world.customer))["addInternalNote"]
    assert refused["__typename"] == "NotAllowed"

    reply = (await _run(api, "Reply", ticket, world.staff))["replyToTicket"]
    assert reply["__typename"] == "MessagePosted" and reply["ticket"]["status"] == "PENDING"
    assert reply["changes"] == [
        {"field": "STATUS", "from": "OPEN", "to": "PENDING", "actor": {"displayName": "Staff"}}
    ]
    assert reply["ticketMessage"]["deliveries"] == [
        {"recipientName": "Customer", "state": "SENDING"}
    ]
    by_customer = (await _run(api, "Reply", ticket, world.customer))["replyToTicket"]
    assert by_customer["__typename"] == "NotAllowed"  # setStatus is for staff

    # The two-step upload, with a token as the curl lines send it.
    token = await _token(rt, world.customer)
    bearer = {"Authorization": f"Bearer {token}"}
    up = await api.client.post(
        "/api/v1/uploads", headers=bearer, data={"team_id": str(world.team)},
        files={"file": ("screenshot.png", PNG, "image/png")},
    )  # fmt: skip
    assert up.status_code == 201, up.text
    assert up.json()["content_type"] == "image/png"
    files = {**ticket, "files": [str(up.json()["attachment_id"])]}
    someone_else = (await _run(api, "ReplyWithFiles", files, world.customer2))["replyToTicket"]
    assert someone_else["__typename"] == "NotFound"  # not their ticket, as if missing
    taken = await api(EXAMPLES["ReplyWithFiles"], files, token=token)
    posted = taken["data"]["replyToTicket"]
    assert posted["__typename"] == "MessagePosted", posted
    (shot,) = posted["ticketMessage"]["attachments"]
    assert (shot["filename"], shot["contentType"], shot["isImage"]) == (
        "screenshot.png", "image/png", True,
    )  # fmt: skip
    assert shot["downloadUrl"] == f"/attachments/{shot['id']}"
    got = await api.client.get(shot["downloadUrl"], headers=bearer)
    assert got.status_code == 200 and got.content == PNG
    again = (await _run(api, "ReplyWithFiles", files, world.staff))["replyToTicket"]
    assert again == {
        "__typename": "ValidationProblem", "field": "attachmentIds",
        "message": again["message"],
    }  # fmt: skip

    # Reading: the staff see the note; the customer does not, nor its deliveries.
    staff_view = (await _run(api, "Thread", ticket, world.staff))["ticket"]["messages"]
    customer_view = (await _run(api, "Thread", ticket, world.customer))["ticket"]["messages"]
    note_id = note["ticketMessage"]["id"]
    assert note_id in [m["id"] for m in staff_view["nodes"]]
    assert note_id not in [m["id"] for m in customer_view["nodes"]]
    assert all(m["deliveries"] == [] for m in customer_view["nodes"])
    assert len(customer_view["nodes"]) == 2 and not customer_view["pageInfo"]["hasPreviousPage"]
    paged = await api(
        EXAMPLES["Thread"].replace("last: 20", "last: 1"),
        {**ticket, "before": None}, user=world.staff,
    )  # fmt: skip
    page = paged["data"]["ticket"]["messages"]
    assert page["pageInfo"]["hasPreviousPage"] and len(page["nodes"]) == 1
    older = (await _run(api, "Thread", {**ticket, "before": page["pageInfo"]["startCursor"]},
                        world.staff))["ticket"]["messages"]  # fmt: skip
    assert [m["id"] for m in older["nodes"]] == [m["id"] for m in staff_view["nodes"][:-1]]
    history = (await _run(api, "History", ticket, world.customer))["ticket"]["history"]
    assert [(h["field"], h["from"], h["to"]) for h in history["nodes"]] == [
        ("STATUS", "OPEN", "PENDING"),  # the staff reply set it
        ("STATUS", "PENDING", "OPEN"),  # the customer's reply (with the file) reopened it
    ]
    assert history["pageInfo"]["hasNextPage"] is False

    # Delivery: a failed e-mail, sent again by staff only.
    message = {"message": reply["ticketMessage"]["id"]}
    nothing = (await _run(api, "Retry", message, world.staff))["retryMessageDelivery"]
    assert (nothing["__typename"], nothing["field"]) == ("ValidationProblem", "message")
    async with rt.engine.connect() as conn:
        (task,) = (
            await conn.execute(
                text("SELECT task_id FROM message_email WHERE message_id = :m"),
                {"m": int(message["message"])},
            )
        ).scalars()
    await fail_task(rt, task)
    shown = (await _run(api, "Thread", ticket, world.staff))["ticket"]["messages"]["nodes"]
    failed = next(m for m in shown if m["id"] == message["message"])
    assert [(d["state"], d["serverReply"]) for d in failed["deliveries"]] == [("FAILED", "boom")]
    customer = (await _run(api, "Retry", message, world.customer))["retryMessageDelivery"]
    assert customer["__typename"] == "NotAllowed"
    done = (await _run(api, "Retry", message, world.staff))["retryMessageDelivery"]
    assert [d["state"] for d in done["deliveries"]] == ["SENDING"]

    # Redaction: admins only; a note asked about by a customer is exactly a missing message.
    staff_try = (await _run(api, "Redact", message, world.staff))["redactMessage"]
    assert staff_try["__typename"] == "NotAllowed"
    hidden = (await _run(api, "Redact", {"message": note_id}, world.customer))["redactMessage"]
    missing = (await _run(api, "Redact", {"message": "999999"}, world.customer))["redactMessage"]
    assert hidden == missing == {"__typename": "NotFound", "message": "Message not found."}
    hidden = (await _run(api, "Retry", {"message": note_id}, world.customer))[
        "retryMessageDelivery"
    ]
    assert hidden == missing
    redacted = (await _run(api, "Redact", message, world.admin))["redactMessage"]
    assert redacted["__typename"] == "TicketMessage" and redacted["body"] == ""
    assert redacted["redactedBy"] == {"displayName": "Admin"} and redacted["redactedAt"]


async def test_the_live_example_carries_notes_to_staff_only(settings, rt, world, clock) -> None:
    ticket = world.tickets["login"]
    staff_token, customer_token = await _token(rt, world.staff), await _token(rt, world.customer)
    async with (
        serve(settings, clock) as served,
        socket(served, token=staff_token) as staff,
        socket(served, token=customer_token) as customer,
    ):
        ops = {}
        for who, s in (("staff", staff), ("customer", customer)):
            ops[who] = await s.subscribe(EXAMPLES["Follow"], {"ticket": str(ticket)})
            first = (await s.next(ops[who]))["data"]["ticketUpdated"]
            assert first["ticket"]["status"] == "OPEN" and first["messages"] == []
        await listening(served, 2)
        await conversation.post_message(rt, world.staff, ticket, "only us", internal=True)
        await conversation.post_message(rt, world.staff, ticket, "for you", set_status="PENDING")
        # Events may split these differently (a read can see the reply's history before its
        # message): gather until the stream has shown all of it.
        seen: dict[str, list[dict[str, Any]]] = {"staff": [], "customer": []}
        for who, s in (("staff", staff), ("customer", customer)):
            changes: list[tuple[str, str]] = []
            status = "OPEN"
            while "for you" not in [m["body"] for m in seen[who]] or status != "PENDING":
                event = (await s.next(ops[who]))["data"]["ticketUpdated"]
                seen[who] += [m for m in event["messages"] if m not in seen[who]]
                changes += [(h["field"], h["to"]) for h in event["history"]]
                status = event["ticket"]["status"]
            while not changes:
                event = (await s.next(ops[who]))["data"]["ticketUpdated"]
                changes += [(h["field"], h["to"]) for h in event["history"]]
            assert changes == [("STATUS", "PENDING")], who
        assert [m["body"] for m in seen["staff"]][:2] == ["only us", "for you"]
        assert {m["body"] for m in seen["customer"]} == {"for you"}
        assert seen["customer"][0]["deliveries"] == []
