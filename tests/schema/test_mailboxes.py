"""Mailboxes over GraphQL (schema/mailboxes.py): the round (create, list, update, test, delete)
by a team admin; staff, customers and outsiders answered exactly as for a missing team or
mailbox; bad values as ValidationProblem naming the field; the password in no response body;
the list's statements not growing with its mailboxes."""

from __future__ import annotations

import json

import pytest

from desk.work import mailbox_admin
from tests.counting import engine_statements as counting
from tests.schema.scene import outcome

SECRET = "gql-pw-never-read-back-41"
FIELDS = (
    "id teamId host port useTls username folder cadenceSeconds enabled staffOnly isDev "
    "lastFetchAt lagSeconds lastError heldCount"
)
CREATE = (
    "mutation($t: ID!, $i: MailboxInput!) { r: createMailbox(teamId: $t, input: $i) { "
    f"__typename ... on Mailbox {{ {FIELDS} }} ... on Problem {{ message }} "
    "... on ValidationProblem { field } } }"
)
UPDATE = (
    "mutation($t: ID!, $id: ID!, $i: MailboxInput!) { r: updateMailbox(teamId: $t, id: $id, "
    f"input: $i) {{ __typename ... on Mailbox {{ {FIELDS} }} ... on Problem {{ message }} "
    "... on ValidationProblem { field } } }"
)
DELETE = (
    "mutation($t: ID!, $id: ID!) { r: deleteMailbox(teamId: $t, id: $id) { __typename "
    "... on Problem { message } } }"
)
TEST = (
    "mutation($t: ID!, $id: ID, $i: MailboxInput) { r: testMailbox(teamId: $t, id: $id, "
    "input: $i) { __typename ... on MailboxTest { ok step message } ... on Problem { message } "
    "... on ValidationProblem { field } } }"
)
LIST = f"query($t: ID!) {{ mailboxes(teamId: $t) {{ {FIELDS} }} }}"


def good(**over: object) -> dict[str, object]:
    return {"host": "imap.acme.test", "port": 993, "useTls": True, "username": "help@acme.test",
            "password": SECRET, **over}  # fmt: skip


async def test_an_admin_manages_a_mailbox_and_never_reads_its_password(api, world) -> None:
    bodies = []
    made = await api(CREATE, {"t": world.team, "i": good()}, user=world.admin)
    bodies.append(made)
    box = made["data"]["r"]
    assert box["__typename"] == "Mailbox", made
    assert (box["port"], box["enabled"], box["heldCount"], box["isDev"]) == (993, True, 0, False)
    listed = await api(LIST, {"t": world.team}, user=world.admin)
    bodies.append(listed)
    assert [m["id"] for m in listed["data"]["mailboxes"]] == [box["id"]]
    changed = await api(
        UPDATE, {"t": world.team, "id": box["id"], "i": {"port": 143, "useTls": False,
                 "staffOnly": True}}, user=world.admin,
    )  # fmt: skip
    bodies.append(changed)
    assert changed["data"]["r"]["port"] == 143 and changed["data"]["r"]["staffOnly"] is True
    tried = await api(
        TEST, {"t": world.team, "id": box["id"], "i": {"host": "no-such-host.invalid"}},
        user=world.admin,
    )  # fmt: skip
    bodies.append(tried)
    assert tried["data"]["r"]["step"] == "dns", tried
    gone = await api(DELETE, {"t": world.team, "id": box["id"]}, user=world.admin)
    assert outcome(gone, "r") == "MailboxDeleted"
    again = await api(DELETE, {"t": world.team, "id": box["id"]}, user=world.admin)
    assert outcome(again, "r") == "NotFound"
    for body in bodies:
        assert SECRET not in json.dumps(body)


@pytest.mark.parametrize("who", ["staff", "customer", "outsider"])
async def test_anyone_but_an_admin_sees_what_a_missing_team_shows(api, rt, world, who) -> None:
    raw = {"host": "imap.acme.test", "username": "u", "password": SECRET}
    box = await mailbox_admin.create_mailbox(rt, world.admin, world.team, raw)
    user = getattr(world, who)
    listed = await api(LIST, {"t": world.team}, user=user)
    assert listed["data"]["mailboxes"] == []
    missing_team = {"t": 999_999}
    for query, v in [
        (CREATE, {"t": world.team, "i": good()}),
        (UPDATE, {"t": world.team, "id": box.id, "i": {"port": 1}}),
        (DELETE, {"t": world.team, "id": box.id}),
        (TEST, {"t": world.team, "id": box.id}),
    ]:
        mine = (await api(query, v, user=user))["data"]["r"]
        none = (await api(query, {**v, **missing_team}, user=world.admin))["data"]["r"]
        assert mine == none == {"__typename": "NotFound", "message": "Team not found."}


@pytest.mark.parametrize(
    ("over", "field"),
    [({"port": 70000}, "port"), ({"cadenceSeconds": 2}, "cadenceSeconds"),
     ({"host": "bad host"}, "host"), ({"password": ""}, "password")],
)  # fmt: skip
async def test_bad_values_are_problems_naming_the_field(api, world, over, field) -> None:
    body = await api(CREATE, {"t": world.team, "i": good(**over)}, user=world.admin)
    got = body["data"]["r"]
    assert (got["__typename"], got["field"]) == ("ValidationProblem", field), body
    assert SECRET not in json.dumps(body)


async def test_the_list_reads_a_fixed_number_of_statements(api, rt, world) -> None:
    async def count() -> int:
        with counting(api.rt.engine) as statements:
            body = await api(LIST, {"t": world.team}, user=world.admin)
        assert "errors" not in body, body
        return len(statements)

    raw = {"host": "imap.acme.test", "username": "u", "password": SECRET}
    await mailbox_admin.create_mailbox(rt, world.admin, world.team, raw)
    few = await count()
    for _ in range(9):
        await mailbox_admin.create_mailbox(rt, world.admin, world.team, raw)
    many = await count()
    assert many == few <= 3
