"""A team's mailboxes over REST (api/rest_mailboxes.py): the team's admins list, connect,
change, test and remove them and act on held mail; staff, customers and another team's admin
get exactly the 404 of a missing team or mailbox; the password is in no answer, not even an
error's; a bad value is a 422 naming its field, with nothing written."""

from __future__ import annotations

import socket

import pytest
import sqlalchemy as sa

from tests.api.tokens import bearer

SECRET = "pw-never-shown-9f3a"


def good(**over: object) -> dict[str, object]:
    return {"host": "imap.acme.test", "username": "help@acme.test", "password": SECRET, **over}


def _team(team: int) -> str:
    return f"/api/v1/teams/{team}/mailboxes"


def _box(box: int, tail: str = "") -> str:
    return f"/api/v1/mailboxes/{box}{tail}"


async def _count(rt, table: str) -> int:
    async with rt.engine.connect() as conn:
        return int((await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def _made(client, world) -> dict:
    made = await client.post(_team(world.team), headers=await bearer(client, world.admin),
                             json=good())  # fmt: skip
    assert made.status_code == 201, made.text
    return made.json()


async def _held_row(rt, box_id: int, sender: str = "stranger@else.test") -> int:
    raw = f"From: {sender}\r\nSubject: Let me in\r\n\r\nHello\r\n".encode()
    async with rt.engine.begin() as conn:
        found = await conn.execute(
            sa.text(
                "INSERT INTO inbound_mail (mailbox_id, uidvalidity, uid, sender, raw, "
                " received_at, parsed_at, outcome) VALUES (:b, 1, 1, :s, :r, now(), now(), "
                " 'held') RETURNING id"
            ),
            {"b": box_id, "s": sender, "r": raw},
        )
        return int(found.scalar_one())


async def test_an_admin_connects_reads_changes_and_removes_a_mailbox(client, world):
    admin = await bearer(client, world.admin)
    made = await _made(client, world)
    assert SECRET not in str(made)
    assert (made["host"], made["port"], made["use_tls"], made["folder"]) == (
        "imap.acme.test", 993, True, "INBOX",
    )  # fmt: skip
    assert made["enabled"] and not made["staff_only"] and made["lag_seconds"] == 0.0
    box = made["mailbox_id"]
    listed = (await client.get(_team(world.team), headers=admin)).json()["items"]
    assert [m["mailbox_id"] for m in listed] == [box] and SECRET not in str(listed)
    changed = await client.patch(
        _box(box), headers=admin, json={"port": 143, "use_tls": False, "staff_only": True}
    )
    assert changed.status_code == 200, changed.text
    got = (await client.get(_box(box), headers=admin)).json()
    assert (got["port"], got["use_tls"], got["staff_only"]) == (143, False, True)
    assert SECRET not in str(got)
    gone = await client.delete(_box(box), headers=admin)
    assert gone.status_code == 204 and gone.content == b""
    assert (await client.get(_box(box), headers=admin)).status_code == 404


@pytest.mark.parametrize("who", ["staff", "customer", "outsider"])
async def test_anyone_but_the_teams_admin_gets_the_404_of_a_missing_one(client, world, who):
    box = (await _made(client, world))["mailbox_id"]
    held = await _held_row(client.rt, box)
    headers = await bearer(client, getattr(world, who))
    pairs = [
        ("get", _team(world.team), _team(99999999), None),
        ("post", _team(world.team), _team(99999999), good()),
        ("get", _box(box), _box(99999999), None),
        ("patch", _box(box), _box(99999999), {"port": 143}),
        ("post", _box(box, "/test"), _box(99999999, "/test"), None),
        ("get", _box(box, "/held"), _box(99999999, "/held"), None),
        ("post", _box(box, f"/held/{held}/accept"), _box(99999999, f"/held/{held}/accept"), None),
        ("post", _box(box, f"/held/{held}/discard"), _box(99999999, "/held/1/discard"), None),
        ("delete", _box(box), _box(99999999), None),
    ]
    for method, url, missing, body in pairs:
        kwargs = {"json": body} if body is not None else {}
        seen = await client.request(method, url, headers=headers, **kwargs)
        absent = await client.request(method, missing, headers=headers, **kwargs)
        assert seen.status_code == absent.status_code == 404, (method, url, seen.text)
        assert seen.json() == absent.json()
    assert await _count(client.rt, "mailbox") == 1
    assert await _count(client.rt, "inbound_mail WHERE outcome = 'held'") == 1
    assert (await client.get(_team(world.team))).status_code == 401


@pytest.mark.parametrize(
    "body, field",
    [
        ({"username": "u", "password": SECRET}, "host"),
        (good(host="imap example.com"), "host"),
        (good(port=0), "port"),
        (good(port="993x"), "port"),
        (good(cadence_seconds=1), "cadence_seconds"),
        (good(password=""), "password"),
        (good(username="   "), "username"),
        (good(use_tls="maybe"), "use_tls"),
        (good(pasword="x"), "pasword"),
        (good(host="send-as-customer.dev.invalid"), "host"),
    ],
)
async def test_a_bad_value_is_a_422_naming_its_field(client, world, body, field):
    admin = await bearer(client, world.admin)
    refused = await client.post(_team(world.team), headers=admin, json=body)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("VALIDATION", field)
    assert SECRET not in refused.text
    assert await _count(client.rt, "mailbox") == 0


async def test_a_bad_change_is_refused_and_the_password_stays_unreadable(client, world):
    admin = await bearer(client, world.admin)
    box = (await _made(client, world))["mailbox_id"]
    for body, field in (({"port": 70000}, "port"), ({"folder": ""}, "folder")):
        refused = await client.patch(_box(box), headers=admin, json=body)
        assert refused.status_code == 422 and refused.json()["error"]["field"] == field
    other = "another-secret-77"
    changed = await client.patch(_box(box), headers=admin, json={"password": other})
    assert changed.status_code == 200 and other not in changed.text
    assert (await client.get(_box(box), headers=admin)).json()["port"] == 993


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_test_connection_names_the_step_that_failed(client, world):
    admin = await bearer(client, world.admin)
    port = _closed_port()
    made = await client.post(
        _team(world.team), headers=admin, json=good(host="127.0.0.1", port=port, use_tls=False)
    )
    box = made.json()["mailbox_id"]
    tried = await client.post(_box(box, "/test"), headers=admin)
    assert tried.status_code == 200, tried.text
    answer = tried.json()
    assert (answer["ok"], answer["step"]) == (False, "refused")
    assert f"127.0.0.1:{port}" in answer["message"] and SECRET not in tried.text
    # Values not saved yet are tried instead, and checked as any change is.
    refused = await client.post(_box(box, "/test"), headers=admin, json={"port": 0})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "port"


async def test_held_mail_is_listed_accepted_and_discarded_by_the_admin(client, world):
    admin = await bearer(client, world.admin)
    box = (await _made(client, world))["mailbox_id"]
    first = await _held_row(client.rt, box)
    listed = (await client.get(_box(box, "/held"), headers=admin)).json()["items"]
    assert [(h["held_id"], h["sender"], h["subject"]) for h in listed] == [
        (first, "stranger@else.test", "Let me in")
    ]
    accepted = await client.post(_box(box, f"/held/{first}/accept"), headers=admin)
    assert accepted.json() == {"held_id": first, "outcome": "accepted"}
    again = await client.post(_box(box, f"/held/{first}/discard"), headers=admin)
    assert again.status_code == 404  # no longer held: acted on once
    async with client.rt.engine.connect() as conn:
        role = await conn.execute(
            sa.text(
                "SELECT m.role FROM membership m JOIN app_user u ON u.id = m.user_id "
                "WHERE lower(u.email) = 'stranger@else.test' AND m.team_id = :t"
            ),
            {"t": world.team},
        )
        assert role.scalar_one() == "CUSTOMER"
    async with client.rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE inbound_mail SET uid = 2"))
    second = await _held_row(client.rt, box, "spam@else.test")
    discarded = await client.post(_box(box, f"/held/{second}/discard"), headers=admin)
    assert discarded.json() == {"held_id": second, "outcome": "discarded"}
    assert (await client.get(_box(box, "/held"), headers=admin)).json()["items"] == []


async def test_held_mail_is_addressed_under_its_own_mailbox(client, world):
    admin = await bearer(client, world.admin)
    one = (await _made(client, world))["mailbox_id"]
    two = (await _made(client, world))["mailbox_id"]
    held = await _held_row(client.rt, one)
    assert (await client.get(_box(two, "/held"), headers=admin)).json()["items"] == []
    wrong = await client.post(_box(two, f"/held/{held}/accept"), headers=admin)
    assert wrong.status_code == 404
    assert await _count(client.rt, "inbound_mail WHERE outcome = 'held'") == 1
