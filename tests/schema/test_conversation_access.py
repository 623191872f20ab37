"""Who may see and do what in a ticket's conversation over GraphQL: every new field, mutation
and the subscription, as admin, staff, the ticket's customer, another customer, a member of the
other team, and nobody. What may not be seen answers exactly as what is missing: a note, and a
note's file, are to a customer exactly like nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.helpdesk import tickets
from desk.people import users
from desk.work import conversation
from schema.types import cursor
from tests.factories import World
from tests.schema.scene import fail_task
from tests.schema.subscribing import serve, socket
from tests.schema.test_conversation import REPLY, upload
from tests.schema.test_subscriptions_sse import _refusal

ROLES = ("admin", "staff", "customer", "customer2", "outsider", "anonymous")
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


@dataclass
class Thread:
    w: World
    ticket: int
    asked: int  # the customer's message, with a file
    answered: int  # staff's reply, whose e-mail failed
    note: int  # staff's note, with a file
    shot: int  # the customer's file
    secret: int  # the note's file

    def user(self, role: str) -> int | None:
        return None if role == "anonymous" else getattr(self.w, role)


async def make_thread(rt: Runtime, w: World) -> Thread:
    ticket = w.tickets["login"]  # Lin's, assigned to Chen
    shot = await upload(rt, w.customer, w.team, "shot.png", PNG)
    asked = await conversation.post_message(
        rt, w.customer, ticket, "It fails", attachment_ids=[shot]
    )
    answered = await conversation.post_message(rt, w.staff, ticket, "Try again")
    await fail_task(rt, answered.email_task_ids[0])
    secret = await upload(rt, w.staff, w.team, "secret.txt", b"internal")
    note = await conversation.post_message(
        rt, w.staff, ticket, "Internal", internal=True, attachment_ids=[secret]
    )
    await tickets.update_ticket(rt, w.admin, ticket, priority="HIGH")
    return Thread(w, ticket, asked.message.id, answered.message.id, note.message.id, shot, secret)


def outcome(body: dict[str, Any], field: str) -> Any:
    errors = body.get("errors") or []
    if errors:
        return errors[0]["extensions"]["code"]
    value = body["data"][field]
    if value is None:
        return "null"
    return value.get("__typename", "ok")


def thread_outcome(body: dict[str, Any], _field: str) -> Any:
    """messages / files / deliveries a reader is shown, or the error code / null."""
    if body.get("errors") or body["data"]["ticket"] is None:
        return outcome(body, "ticket")
    nodes = body["data"]["ticket"]["messages"]["nodes"]
    files = sum(len(m["attachments"]) for m in nodes)
    mailed = sum(len(m["deliveries"]) for m in nodes)
    return f"m={len(nodes)} f={files} d={mailed}"


def history_outcome(body: dict[str, Any], _field: str) -> Any:
    if body.get("errors") or body["data"]["ticket"] is None:
        return outcome(body, "ticket")
    return f"n={len(body['data']['ticket']['history']['nodes'])}"


def listed_outcome(body: dict[str, Any], _field: str) -> Any:
    if body.get("errors"):
        return outcome(body, "tickets")
    nodes = body["data"]["tickets"]["nodes"]
    return f"m={sum(len(t['messages']['nodes']) for t in nodes)}"


Vars = Callable[[Thread], dict[str, Any]]
Case = tuple[str, str, Vars, dict[str, Any], Callable[[dict[str, Any], str], Any]]


def case(query: str, field: str, variables: Vars, expect: dict[str, Any], read=outcome) -> Case:
    return query, field, variables, {"anonymous": "UNAUTHENTICATED", **expect}, read


STAFFS = {"admin": "m=3 f=2 d=2", "staff": "m=3 f=2 d=2"}
GONE = {"customer2": "null", "outsider": "null"}
MESSAGES = """query($id: ID!) { ticket(id: $id) { messages(first: 10) { nodes { id internal body createdAt
  redactedAt redactedBy { id } author { id } ticket { id }
  attachments { id filename contentType size isImage createdAt downloadUrl }
  deliveries { taskId recipientName recipient { id } state serverReply attempts } } } } }"""
HISTORY = """query($id: ID!) { ticket(id: $id) { history { nodes { id field from to at
  actor { id } fromUser { id } toUser { id } } pageInfo { hasNextPage } } } }"""
LISTED = "query($t: ID!) { tickets(teamId: $t) { nodes { messages { nodes { id } } } } }"
RESULT = "{ __typename }"
NOTE = 'mutation($t: ID!) { addInternalNote(ticketId: $t, body: "n") { __typename } }'
REDACT = "mutation($id: ID!) { redactMessage(id: $id) { __typename } }"
RETRY = "mutation($id: ID!) { retryMessageDelivery(id: $id) { __typename } }"
SET = 'mutation($t: ID!) { replyToTicket(ticketId: $t, body: "r", setStatus: PENDING) { __typename } }'

CASES: dict[str, Case] = {
    "Ticket.messages and every TicketMessage field": case(
        MESSAGES, "ticket", lambda t: {"id": t.ticket},
        {**STAFFS, "customer": "m=2 f=1 d=0", **GONE}, thread_outcome,
    ),
    "Ticket.history and every TicketHistoryEntry field": case(
        HISTORY, "ticket", lambda t: {"id": t.ticket},
        {"admin": "n=1", "staff": "n=1", "customer": "n=1", **GONE}, history_outcome,
    ),
    "tickets { messages }": case(
        LISTED, "tickets", lambda t: {"t": t.w.team},
        {"admin": "m=3", "staff": "m=3", "customer": "m=2", "customer2": "m=0", "outsider": "m=0"},
        listed_outcome,
    ),
    "replyToTicket": case(
        REPLY, "replyToTicket", lambda t: {"t": t.ticket, "b": "hi"},
        {"admin": "MessagePosted", "staff": "MessagePosted", "customer": "MessagePosted",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
    "replyToTicket with setStatus": case(
        SET, "replyToTicket", lambda t: {"t": t.ticket},
        {"admin": "MessagePosted", "staff": "MessagePosted", "customer": "NotAllowed",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
    "addInternalNote": case(
        NOTE, "addInternalNote", lambda t: {"t": t.ticket},
        {"admin": "MessagePosted", "staff": "MessagePosted", "customer": "NotAllowed",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
    "redactMessage of the customer's message": case(
        REDACT, "redactMessage", lambda t: {"id": t.asked},
        {"admin": "TicketMessage", "staff": "NotAllowed", "customer": "NotAllowed",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
    "redactMessage of a note": case(
        REDACT, "redactMessage", lambda t: {"id": t.note},
        {"admin": "TicketMessage", "staff": "NotAllowed", "customer": "NotFound",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
    "retryMessageDelivery of a failed reply": case(
        RETRY, "retryMessageDelivery", lambda t: {"id": t.answered},
        {"admin": "TicketMessage", "staff": "TicketMessage", "customer": "NotAllowed",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
    "retryMessageDelivery of a note": case(
        RETRY, "retryMessageDelivery", lambda t: {"id": t.note},
        {"admin": "ValidationProblem", "staff": "ValidationProblem", "customer": "NotFound",
         "customer2": "NotFound", "outsider": "NotFound"},
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "role"), [pytest.param(n, r, id=f"{n}-{r}") for n in CASES for r in ROLES]
)
async def test_access(api, rt, world, name, role) -> None:
    query, field, variables, expect, read = CASES[name]
    t = await make_thread(rt, world)
    body = await api(query, variables(t), user=t.user(role))
    assert read(body, field) == expect[role], body


def _problem(body: dict[str, Any], field: str) -> Any:
    assert "errors" not in body, body
    return body["data"][field]


async def test_a_note_and_its_file_are_to_a_customer_exactly_like_missing(api, rt, world) -> None:
    t = await make_thread(rt, world)
    missing_message, missing_file = t.note + 1000, t.secret + 1000
    for mutation, field in [(REDACT, "redactMessage"), (RETRY, "retryMessageDelivery")]:
        full = mutation.replace("{ __typename }", "{ __typename ... on Problem { message } }")
        note = await api(full, {"id": t.note}, user=world.customer)
        missing = await api(full, {"id": missing_message}, user=world.customer)
        assert _problem(note, field) == _problem(missing, field)
        assert _problem(note, field)["__typename"] == "NotFound"
    # The note's file offered as an upload id: the same refusal as an id nobody has.
    for who in (world.customer, world.customer2):
        secret = await api(REPLY, {"t": t.ticket, "b": "x", "a": [str(t.secret)]}, user=who)
        nothing = await api(REPLY, {"t": t.ticket, "b": "x", "a": [str(missing_file)]}, user=who)
        assert _problem(secret, "replyToTicket") == _problem(nothing, "replyToTicket")
    # The thread shows no trace of it: no message, no file, and no gap a client could count.
    shown = await api(MESSAGES, {"id": t.ticket}, user=world.customer)
    nodes = shown["data"]["ticket"]["messages"]["nodes"]
    assert [m["body"] for m in nodes] == ["It fails", "Try again"]
    assert {a["id"] for m in nodes for a in m["attachments"]} == {str(t.shot)}


def test_every_conversation_operation_is_in_the_matrix() -> None:
    from schema.root import build_schema

    schema = build_schema()
    covered = {spec[1] for spec in CASES.values()}
    mutations = {"replyToTicket", "addInternalNote", "redactMessage", "retryMessageDelivery"}
    assert mutations <= covered
    names = {f.name for f in schema.get_type_by_name("Mutation").fields}
    from strawberry.utils.str_converters import to_camel_case

    assert mutations <= {to_camel_case(n) for n in names}
    ticket_fields = {f.name for f in schema.get_type_by_name("Ticket").fields}
    assert {"messages", "history"} <= ticket_fields


FOLLOW = """subscription($id: ID!, $after: String) { ticketUpdated(id: $id, after: $after) {
  ticket { id } messages { id internal attachments { id } deliveries { taskId } }
  history { field } } }"""


async def test_ticket_updated_for_every_role(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """The subscription's first event, with the messages after the customer's first (`after`):
    staff's reply (mailed) and the note (with its file)."""
    t = await make_thread(rt, world)
    variables = {"id": str(t.ticket), "after": cursor("m", t.asked)}
    seen: dict[str, Any] = {}
    async with serve(settings, clock) as served:
        for role in ROLES[:-1]:
            token = (await users.create_token(rt, t.user(role) or 0, "matrix"))[1]
            async with socket(served, token=token) as s:
                op = await s.subscribe(FOLLOW, variables)
                payload = await s.next(op)
                assert "errors" not in payload, payload
                first = payload["data"]["ticketUpdated"]
                await s.stop(op)
            if first is None:
                seen[role] = "null"
                continue
            ms = first["messages"]
            files = sum(len(m["attachments"]) for m in ms)
            seen[role] = f"m={len(ms)} f={files} d={sum(len(m['deliveries']) for m in ms)}"
        refused = await _refusal(served, {"query": FOLLOW, "variables": variables}, {})
        seen["anonymous"] = refused.json()["errors"][0]["extensions"]["code"]
    assert seen == {
        "admin": "m=2 f=1 d=1", "staff": "m=2 f=1 d=1", "customer": "m=1 f=0 d=0",
        "customer2": "null", "outsider": "null", "anonymous": "UNAUTHENTICATED",
    }  # fmt: skip
