"""The conversation over REST: reading a thread and its history, posting replies and notes as
JSON or multipart, the two-step upload — who may, who is refused exactly as if missing, and a
clear 4xx for every bad input with nothing written."""

from __future__ import annotations

import sqlalchemy as sa

from desk.helpdesk import tickets
from tests.api.tokens import bearer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


def _url(ticket: int, tail: str = "messages") -> str:
    return f"/api/v1/tickets/{ticket}/{tail}"


async def _count(rt, table: str) -> int:
    async with rt.engine.connect() as conn:
        return int((await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one())


async def test_reply_note_and_what_each_side_reads(client, world):
    ticket = world.tickets["login"]
    chen, lin = await bearer(client, world.staff), await bearer(client, world.customer)
    reply = await client.post(
        _url(ticket), headers=chen, json={"body": "Try again", "set_status": "PENDING"}
    )
    assert reply.status_code == 201, reply.text
    posted = reply.json()
    assert posted["ticket_status"] == "PENDING" and posted["email_task_ids"]
    assert posted["message"]["author_name"] and not posted["message"]["internal"]
    note = await client.post(_url(ticket), headers=chen, json={"body": "VIP", "internal": True})
    assert note.status_code == 201 and note.json()["email_task_ids"] == []

    staff_view = (await client.get(_url(ticket), headers=chen)).json()["items"]
    lin_view = (await client.get(_url(ticket), headers=lin)).json()["items"]
    assert [m["body"] for m in staff_view][-2:] == ["Try again", "VIP"]
    assert "VIP" not in [m["body"] for m in lin_view]
    assert any(m["deliveries"] for m in staff_view)
    assert all(m["deliveries"] == [] for m in lin_view)

    history = (await client.get(_url(ticket, "history"), headers=lin)).json()["items"]
    assert {"field": "status", "new_value": "PENDING"}.items() <= history[-1].items()


async def test_customer_reply_reopens_and_note_is_refused(client, world):
    ticket = world.tickets["login"]
    await tickets.update_ticket(client.rt, world.staff, ticket, status="RESOLVED")
    lin = await bearer(client, world.customer)
    sent = await client.post(_url(ticket), headers=lin, json={"body": "Still broken"})
    assert sent.status_code == 201 and sent.json()["ticket_status"] == "OPEN"
    before = await _count(client.rt, "ticket_message")
    for sneaky in ({"body": "x", "internal": True}, {"body": "x", "set_status": "CLOSED"}):
        refused = await client.post(_url(ticket), headers=lin, json=sneaky)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    assert await _count(client.rt, "ticket_message") == before


async def test_who_is_refused_as_missing(client, world):
    ticket = world.tickets["login"]
    for user in (world.customer2, world.outsider):
        headers = await bearer(client, user)
        for tail in ("messages", "history"):
            seen = await client.get(_url(ticket, tail), headers=headers)
            missing = await client.get(_url(99999999, tail), headers=headers)
            assert seen.status_code == missing.status_code == 404
            assert seen.json() == missing.json()
        posted = await client.post(_url(ticket), headers=headers, json={"body": "hi"})
        assert posted.status_code == 404
    anon = await client.get(_url(ticket))
    assert anon.status_code == 401


async def test_multipart_reply_with_a_file_and_two_step_upload(client, world):
    ticket = world.tickets["login"]
    lin = await bearer(client, world.customer)
    sent = await client.post(
        _url(ticket),
        headers=lin,
        data={"body": "Screenshot attached"},
        files=[("files", ("../../etc/shot\x00.png", PNG, "text/plain"))],
    )
    assert sent.status_code == 201, sent.text
    [shown] = sent.json()["message"]["attachments"]
    assert "/" not in shown["filename"] and "\x00" not in shown["filename"]
    assert shown["content_type"] == "image/png"  # sniffed, not what the sender said
    got = await client.get(shown["download_url"], headers=lin)
    assert got.content == PNG

    up = await client.post(
        "/api/v1/uploads",
        headers=lin,
        data={"team_id": str(world.team)},
        files={"file": ("log.txt", b"trace", "text/plain")},
    )
    assert up.status_code == 201, up.text
    file_id = up.json()["attachment_id"]
    chen = await bearer(client, world.staff)
    stolen = await client.post(
        _url(ticket), headers=chen, json={"body": "mine", "attachment_ids": [file_id]}
    )
    assert stolen.status_code == 422  # another's upload is like none at all
    used = await client.post(_url(ticket), headers=lin, json={"attachment_ids": [file_id]})
    assert used.status_code == 201 and used.json()["message"]["attachments"][0]["size"] == 5


async def test_bad_input_is_a_clear_4xx_and_writes_nothing(client, world):
    ticket = world.tickets["login"]
    chen = await bearer(client, world.staff)
    before = await _count(client.rt, "ticket_message")
    cases = [
        ({"json": {"body": "   "}}, 422, "body"),
        ({"json": {"body": "x", "colour": "red"}}, 422, "colour"),
        ({"json": {"body": "x", "set_status": "DONE"}}, 422, "set_status"),
        ({"json": {"body": "a\x00b"}}, 422, "body"),
        ({"content": b"\xff\xfe{", "headers": {"Content-Type": "application/json"}}, 422, "body"),
        ({"json": {"body": "x" * 100_001}}, 413, "body"),
        ({"json": {"body": "x", "attachment_ids": [0]}}, 422, "attachment_ids.0"),
    ]
    for kw, status, field in cases:
        headers = chen | kw.pop("headers", {})
        answer = await client.post(_url(ticket), headers=headers, **kw)
        assert answer.status_code == status, (kw, answer.text)
        error = answer.json()["error"]
        assert error["message"]
        if status == 422:
            assert error["field"] == field, (kw, error)
    # One past the cap is the message's refusal; far past it the form parser's, answered alike.
    for n in (11, 40):
        many = [("files", (f"f{i}.txt", b"x", "text/plain")) for i in range(n)]
        too_many = await client.post(_url(ticket), headers=chen, data={"body": "x"}, files=many)
        assert too_many.status_code == 413, (n, too_many.text)
        assert too_many.json()["error"]["message"] == "files: at most 10 files per message"
    not_an_id = await client.get(_url(ticket), headers=chen, params={"after": "abc"})
    assert not_an_id.status_code == 422
    assert await _count(client.rt, "ticket_message") == before


async def test_paging_the_thread(client, world):
    ticket = world.tickets["login"]
    chen = await bearer(client, world.staff)
    for i in range(5):
        await client.post(_url(ticket), headers=chen, json={"body": f"reply {i}"})
    seen: list[str] = []
    after = None
    while True:
        params = {"first": 2} | ({"after": after} if after else {})
        page = (await client.get(_url(ticket), headers=chen, params=params)).json()
        seen += [m["body"] for m in page["items"]]
        after = page["next_cursor"]
        if after is None:
            break
    assert seen[-5:] == [f"reply {i}" for i in range(5)] and len(seen) == len(set(seen))
