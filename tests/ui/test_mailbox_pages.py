"""The mailboxes page (ui/mailbox_routes.py): a team's admin lists, connects, edits, deletes
and tests its mailboxes and accepts or discards held mail; staff, customers and another team's
admin get exactly what an unknown address answers; a bad value is shown at its field with the
form kept (the password never filled in); "Test connection" says in words which step failed,
against a closed port and a real Dovecot (tests/imap_server.py); all of it in Chinese too."""

from __future__ import annotations

import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from desk.work import mailbox_admin
from tests.imap_server import PASSWORD, USER, ImapServer, available
from ui import i18n

HTML = {"Accept": "text/html"}
SECRET = "pw-never-shown-9f3a"
FORM = {
    "host": "imap.acme.test", "port": "993", "username": "help@acme.test", "password": SECRET,
    "folder": "INBOX", "cadence_seconds": "30", "use_tls": "on", "enabled": "on",
}  # fmt: skip


def good(**over: object) -> dict[str, object]:
    return {"host": "imap.acme.test", "username": "help@acme.test", "password": SECRET, **over}


async def _box(rt, world, **over: object):
    return await mailbox_admin.create_mailbox(rt, world.admin, world.team, good(**over))


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


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_admin_sees_connects_edits_and_deletes(page_as, world, rt) -> None:
    page = await page_as(world.admin)
    assert 'href="/mailboxes"' in (await page.get("/tickets")).text
    empty = await page.get("/mailboxes")
    assert empty.status_code == 200 and "No mailboxes yet." in empty.text
    made = await page.hx_post("/mailboxes", FORM)
    assert made.status_code == 201 and "imap.acme.test:993" in made.text
    assert SECRET not in made.text
    [box] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    edit = await page.get(f"/mailboxes/{box.id}")
    assert edit.status_code == 200 and 'value="help@acme.test"' in edit.text
    assert SECRET not in edit.text and 'name="password" type="password"' in edit.text
    changed = FORM | {"port": "143", "password": "", "staff_only": "on"}
    changed.pop("use_tls")
    saved = await page.hx_post(f"/mailboxes/{box.id}", changed)
    assert saved.status_code == 200 and "imap.acme.test:143" in saved.text
    [after] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    assert (after.port, after.use_tls, after.staff_only) == (143, False, True)
    plain = await page.post(f"/mailboxes/{box.id}/delete", data={"csrf_token": page.csrf})
    assert plain.status_code == 303 and plain.headers["location"] == "/mailboxes"
    assert await mailbox_admin.list_mailboxes(rt, world.admin, world.team) == []


async def test_a_bad_value_is_shown_at_its_field_and_the_password_not_kept(
    page_as, world, rt
) -> None:
    page = await page_as(world.admin)
    refused = await page.hx_post("/mailboxes", FORM | {"port": "99999"})
    assert refused.status_code == 422
    assert 'id="err-port"' in refused.text and 'aria-invalid="true"' in refused.text
    assert 'value="imap.acme.test"' in refused.text and SECRET not in refused.text
    no_host = await page.post("/mailboxes", data=FORM | {"host": "", "csrf_token": page.csrf},
                              headers=HTML)  # fmt: skip
    assert no_host.status_code == 422 and 'id="err-host"' in no_host.text
    assert await mailbox_admin.list_mailboxes(rt, world.admin, world.team) == []


@pytest.mark.parametrize("who", ["staff", "customer", "outsider"])
async def test_anyone_else_gets_exactly_a_missing_page(page_as, world, rt, who) -> None:
    box = await _box(rt, world)
    held = await _held_row(rt, box.id)
    page = await page_as(getattr(world, who))
    if who != "outsider":
        assert 'href="/mailboxes"' not in (await page.get("/tickets")).text
    asks = [
        ("GET", f"/mailboxes/{box.id}", {}),
        ("POST", f"/mailboxes/{box.id}", FORM),
        ("POST", f"/mailboxes/{box.id}/test", {}),
        ("POST", f"/mailboxes/{box.id}/delete", {}),
    ]
    if who != "outsider":  # the other team's admin has a page of their own team's mailboxes
        asks += [
            ("GET", "/mailboxes", {}),
            ("POST", "/mailboxes", FORM),
            ("POST", f"/mailboxes/held/{held}/accept", {}),
            ("POST", f"/mailboxes/held/{held}/discard", {}),
        ]
    for method, url, data in asks:
        for hx in (False, True):
            answers = []
            for target in (url, "/no-such-page"):
                if method == "GET":
                    r = await (page.hx_get(target) if hx else page.get(target, headers=HTML))
                elif hx:
                    r = await page.hx_post(target, data)
                else:
                    r = await page.post(target, data=data | {"csrf_token": page.csrf}, headers=HTML)
                answers.append((r.status_code, r.text, r.headers.get("hx-retarget")))
            assert answers[0] == answers[1], (method, url, hx)
            assert answers[0][0] == 404
    [still] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    assert (still.port, still.held_count) == (993, 1)


async def test_another_teams_held_mail_is_not_theirs_to_accept(page_as, world, rt) -> None:
    held = await _held_row(rt, (await _box(rt, world)).id)
    page = await page_as(world.outsider)
    r = await page.hx_post(f"/mailboxes/held/{held}/accept", {})
    assert r.status_code == 404 and "no longer held" in r.text
    [still] = await mailbox_admin.list_mailboxes(rt, world.admin, world.team)
    assert still.held_count == 1


async def test_held_mail_is_accepted_or_discarded(page_as, world, rt) -> None:
    box = await _box(rt, world, staff_only=True)
    held = await _held_row(rt, box.id)
    page = await page_as(world.admin)
    listed = await page.get("/mailboxes")
    assert "stranger@else.test" in listed.text and "Let me in" in listed.text
    accepted = await page.hx_post(f"/mailboxes/held/{held}/accept", {})
    assert accepted.status_code == 200 and "is now a customer" in accepted.text
    again = await page.hx_post(f"/mailboxes/held/{held}/discard", {})
    assert again.status_code == 404 and "no longer held" in again.text
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE inbound_mail SET uid = 2"))
    other = await _held_row(rt, box.id, "spam@else.test")
    discarded = await page.hx_post(f"/mailboxes/held/{other}/discard", {})
    assert discarded.status_code == 200 and "will not become a ticket" in discarded.text
    assert "No mail is held." in discarded.text


async def test_test_connection_says_the_refused_step(page_as, world, rt) -> None:
    port = _closed_port()
    box = await _box(rt, world, host="127.0.0.1", port=port, use_tls=False)
    page = await page_as(world.admin)
    r = await page.hx_post(f"/mailboxes/{box.id}/test", {})
    assert r.status_code == 200 and 'data-step="refused"' in r.text
    assert "refused the connection" in r.text and f"127.0.0.1:{port}" in r.text
    assert SECRET not in r.text and "<html" not in r.text
    # Without htmx: the page, with the answer on it.
    whole = await page.post(f"/mailboxes/{box.id}/test", data={"csrf_token": page.csrf},
                            headers=HTML)  # fmt: skip
    assert whole.status_code == 200 and 'data-step="refused"' in whole.text
    # The edit form's values not saved yet are checked first.
    bad = await page.hx_post(f"/mailboxes/{box.id}/test", FORM | {"port": "0"})
    assert bad.status_code == 422 and "port" in bad.text


@pytest.fixture
def imap() -> Iterator[ImapServer]:
    why = available()
    if why:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="taskdesk-imap-"))
    server = ImapServer(root)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_test_connection_against_a_real_server(page_as, world, rt, imap) -> None:
    box = await _box(rt, world, host=imap.host, port=imap.port, use_tls=False, username=USER,
                     password=PASSWORD)  # fmt: skip
    page = await page_as(world.admin)
    works = await page.hx_post(f"/mailboxes/{box.id}/test", {})
    assert 'data-step="ok"' in works.text, works.text
    form = FORM | {"host": imap.host, "port": str(imap.port), "username": USER,
                   "password": "wrong-one"}  # fmt: skip
    form.pop("use_tls")
    rejected = await page.hx_post(f"/mailboxes/{box.id}/test", form)
    assert 'data-step="login"' in rejected.text and "wrong-one" not in rejected.text
    missing = await page.hx_post(f"/mailboxes/{box.id}/test", form | {"password": "",
                                 "folder": "Nowhere"})  # fmt: skip
    assert 'data-step="folder"' in missing.text and PASSWORD not in missing.text


async def test_the_page_is_all_in_chinese(page_as, world, rt) -> None:
    box = await _box(rt, world, host="127.0.0.1", port=_closed_port(), use_tls=False)
    await _held_row(rt, box.id)
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    zh = i18n.catalog("zh_Hans")
    zh.missing.clear()
    page = await page_as(world.admin)
    for url in ("/mailboxes", f"/mailboxes/{box.id}"):
        r = await page.get(url)
        assert r.status_code == 200 and 'lang="zh-Hans"' in r.text
    await page.hx_post("/mailboxes", FORM | {"port": "x"})
    await page.hx_post("/mailboxes", FORM)
    await page.hx_post(f"/mailboxes/{box.id}/test", {})
    await page.post(f"/mailboxes/{box.id}/test", data={"csrf_token": page.csrf}, headers=HTML)
    assert zh.missing == set()
    r = await page.get("/mailboxes")
    assert "邮箱" in r.text
