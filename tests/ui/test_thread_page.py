"""A ticket's conversation on its page (ui/thread_routes.py, ui/thread_view.py): the thread's
window and its earlier ones, replies and staff's internal notes with files, status set with a
reply, caps that say which limit was passed, redaction for admins only — and, for whoever may not
see the ticket or a note, on every route exactly the answer of a missing one."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from api.app import create_app
from desk.core.settings import load_settings
from desk.work import conversation, opening
from tests.sessions import signed_in
from tests.ui.conftest import Page
from ui.thread_view import WINDOW
from web.auth import SESSION_COOKIE

MISSING = 2_000_000_000  # a ticket (and message) id that exists nowhere


async def _open(rt, world, body: str = "The VPN drops every ten minutes.") -> tuple[int, int]:
    """Lin's new ticket with its opening message: (ticket id, message id)."""
    opened = await opening.open_ticket(rt, world.customer, world.team, "VPN keeps dropping", body)
    assert opened.ticket.id is not None
    return opened.ticket.id, opened.message.id


def _form(page_html: str) -> dict[str, str]:
    """The reply form's hidden fields as the page rendered them (what a browser sends back)."""
    form = page_html[page_html.index('<form id="reply"') :]
    form = form[: form.index("</form>")]
    found = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form)
    return {k: v for k, v in found if k != "csrf_token"}


async def _reply(page: Page, ticket: int, body: str, **more: Any) -> httpx.Response:
    """Post the reply form of the ticket's page as it stands, with `more` fields (and `files`)."""
    fields = _form((await page.get(f"/tickets/{ticket}")).text)
    files = more.pop("files", None)
    data = fields | {"body": body, "set_status": ""} | more
    if files is None:  # a file input left empty still sends its part
        files = [("files", ("", b"", "application/octet-stream"))]
    return await page.hx_post(f"/tickets/{ticket}/messages", data=data, files=files)


async def _rows(rt, sql: str, **params: Any) -> list[Any]:
    async with rt.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql), params)).all())


async def _messages(rt, ticket: int) -> list[Any]:
    return await _rows(
        rt,
        "SELECT id, author_id, internal, body, attachment_count, redacted_at FROM ticket_message "
        "WHERE ticket_id = :t ORDER BY id",
        t=ticket,
    )


async def _status(rt, ticket: int) -> str:
    (row,) = await _rows(rt, "SELECT status FROM ticket WHERE id = :t", t=ticket)
    return str(row.status)


async def _emails_of(rt, message_id: int) -> list[Any]:
    return await _rows(
        rt,
        "SELECT t.id, t.kind, t.owner_id FROM message_email e "
        "JOIN background_task t ON t.id = e.task_id WHERE e.message_id = :m ORDER BY t.id",
        m=message_id,
    )


def _ids_shown(html: str) -> list[int]:
    return [int(x) for x in re.findall(r'data-msg-id="(\d+)"', html)]


async def test_staff_opens_the_ticket_and_sees_the_opening_message(page_as, world, rt) -> None:
    ticket, first = await _open(rt, world, "Since Monday <b>nothing</b> works.")
    r = await (await page_as(world.staff)).get(f"/tickets/{ticket}")
    assert r.status_code == 200
    assert _ids_shown(r.text) == [first]
    assert "Since Monday &lt;b&gt;nothing&lt;/b&gt; works." in r.text
    assert "<b>nothing" not in r.text
    assert "Show earlier messages" not in r.text  # the whole thread fits one window
    assert (
        '<span class="as-reply">Reply</span><span class="as-note" hidden>Add note</span>' in r.text
    )
    assert '<script src="/static/thread.js" defer></script>' in r.text  # the live thread
    assert '<p class="empty" id="thread-empty" hidden>' in r.text


async def test_public_reply_appears_in_the_thread_and_mails_the_customer(
    page_as, world, rt
) -> None:
    ticket, first = await _open(rt, world)
    staff = await page_as(world.staff)
    r = await _reply(staff, ticket, "Please try the new client.\nIt reconnects by itself.")
    assert r.status_code == 200
    (_, reply) = await _messages(rt, ticket)
    assert reply.author_id == world.staff and not reply.internal
    # What the thread gained, appended; the form comes back fresh, out of band.
    assert _ids_shown(r.text) == [reply.id]
    assert "Please try the new client.<br>\nIt reconnects by itself." in r.text
    assert '<form id="reply"' in r.text and 'hx-swap-oob="true"' in r.text
    assert f'name="after" value="{reply.id}"' in r.text
    (mail,) = await _emails_of(rt, reply.id)
    assert mail.kind == "EMAIL" and mail.owner_id == world.customer
    # Without htmx (no JavaScript): the post, then the page again.
    plain = await staff.post(
        f"/tickets/{ticket}/messages", data={"body": "And a second one.", "csrf_token": staff.csrf}
    )
    assert plain.status_code == 303 and plain.headers["location"] == f"/tickets/{ticket}"
    seen = await (await page_as(world.customer)).get(f"/tickets/{ticket}")
    assert _ids_shown(seen.text)[:2] == [first, reply.id]
    assert "Please try the new client." in seen.text and "And a second one." in seen.text


async def test_a_double_submit_of_the_same_form_posts_once(page_as, world, rt) -> None:
    ticket, _first = await _open(rt, world)
    staff = await page_as(world.staff)
    fields = _form((await staff.get(f"/tickets/{ticket}")).text)
    data = fields | {"body": "On it.", "set_status": ""}
    for _ in range(2):
        r = await staff.hx_post(f"/tickets/{ticket}/messages", data=data)
        assert r.status_code == 200
    assert [m.body for m in await _messages(rt, ticket)][1:] == ["On it."]


async def test_internal_note_is_never_shown_to_the_customer(page_as, world, rt) -> None:
    ticket, first = await _open(rt, world)
    staff, customer = await page_as(world.staff), await page_as(world.customer)
    r = await _reply(staff, ticket, "Customer is on the legacy plan.", internal="on")
    assert r.status_code == 200
    (_, note) = await _messages(rt, ticket)
    assert note.internal
    assert "note-badge" in r.text and "Staff only" in r.text
    assert await _emails_of(rt, note.id) == []  # nobody is told of a note
    assert _ids_shown((await staff.get(f"/tickets/{ticket}")).text) == [first, note.id]

    page = await customer.get(f"/tickets/{ticket}")
    assert _ids_shown(page.text) == [first]
    assert "legacy plan" not in page.text and "Note" not in page.text
    newer = await customer.hx_get(f"/tickets/{ticket}/thread?after={first}")
    assert newer.status_code == 204 and "legacy plan" not in newer.text
    # The note's own address answers exactly as an id that does not exist.
    for hx in (False, True):
        get = customer.hx_get if hx else customer.get
        hidden = await get(f"/tickets/{ticket}/messages/{note.id}")
        missing = await get(f"/tickets/{ticket}/messages/{MISSING}")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.text == missing.text
        assert "legacy plan" not in hidden.text
    # Staff get the note as a fragment.
    mine = await staff.hx_get(f"/tickets/{ticket}/messages/{note.id}")
    assert mine.status_code == 200 and "legacy plan" in mine.text


async def test_a_customer_cannot_post_a_note(page_as, world, rt) -> None:
    ticket, first = await _open(rt, world)
    customer = await page_as(world.customer)
    page = (await customer.get(f"/tickets/{ticket}")).text
    assert 'name="internal"' not in page  # no toggle to begin with
    assert "Reply and mark" not in page
    for extra in ({"internal": "on"}, {"internal": "true"}, {"set_status": "CLOSED"}):
        r = await _reply(customer, ticket, "Let me in as staff", **extra)
        assert r.status_code == 403
        assert "Only staff and admins can do this." in r.text
    assert [m.id for m in await _messages(rt, ticket)] == [first]
    assert await _status(rt, ticket) == "OPEN"


async def test_reply_with_a_file_links_to_it(page_as, world, rt) -> None:
    ticket, _first = await _open(rt, world)
    customer = await page_as(world.customer)
    shot = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
    files = [
        ("files", ("screen.png", shot, "image/png")),
        ("files", ("log.txt", b"E42", "text/plain")),
    ]
    r = await _reply(customer, ticket, "", files=files)  # files alone make a message
    assert r.status_code == 200
    (_, reply) = await _messages(rt, ticket)
    assert reply.attachment_count == 2 and reply.body == ""
    stored = await _rows(
        rt, "SELECT id, filename FROM message_attachment WHERE message_id = :m ORDER BY id",
        m=reply.id,
    )  # fmt: skip
    assert [f.filename for f in stored] == ["screen.png", "log.txt"]
    for f in stored:
        assert f'<a href="/attachments/{f.id}" download>{f.filename}</a>' in r.text
    page = (await (await page_as(world.staff)).get(f"/tickets/{ticket}")).text
    assert f'href="/attachments/{stored[0].id}"' in page
    got = await customer.get(f"/attachments/{stored[0].id}")
    assert got.status_code == 200 and got.content == shot
    # The PNG (sniffed as one) shows as a thumbnail; the text file is only a link.
    assert f'<img class="thumb" src="/attachments/{stored[0].id}"' in page
    assert f'src="/attachments/{stored[1].id}"' not in page


async def test_only_sniffed_small_raster_images_get_a_thumbnail(page_as, world, rt) -> None:
    """An SVG (it can carry script) and a "PNG" whose bytes are not one are links only, as is
    a real PNG above the thumbnail size."""
    from ui.thread_view import THUMBNAIL_MAX_BYTES

    ticket, _first = await _open(rt, world)
    staff = await page_as(world.staff)
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    big = b"\x89PNG\r\n\x1a\n" + b"\x00" * THUMBNAIL_MAX_BYTES
    files = [
        ("files", ("x.svg", svg, "image/svg+xml")),
        ("files", ("fake.png", b"not a png", "image/png")),
        ("files", ("big.png", big, "image/png")),
    ]
    assert (await _reply(staff, ticket, "three files", files=files)).status_code == 200
    page = (await staff.get(f"/tickets/{ticket}")).text
    assert page.count("/attachments/") >= 3 and 'class="thumb"' not in page


def _multipart(fields: dict[str, str], files: list[tuple[bytes, bytes]]) -> tuple[bytes, str]:
    """A multipart body written by hand: httpx would percent-encode a NUL in a file name, a
    hostile client sends it as it is."""
    boundary = "thread-test-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    for name, data in files:
        parts.append(
            f"--{boundary}\r\n".encode()
            + b'Content-Disposition: form-data; name="files"; filename="' + name + b'"\r\n'
            + b"Content-Type: text/plain\r\n\r\n" + data + b"\r\n"
        )  # fmt: skip
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), boundary


async def test_file_names_with_folders_or_nul_are_cleaned(page_as, world, rt) -> None:
    ticket, _first = await _open(rt, world)
    staff = await page_as(world.staff)
    fields = _form((await staff.get(f"/tickets/{ticket}")).text) | {"body": "Files"}
    names = [
        b"../../etc/passwd",
        b"C:\\Users\\lin\\report.txt",
        b"nul\x00byte.txt",
        "\u202etxt.exe".encode(),
        b"<img src=x onerror=alert(1)>.txt",
        b"..",
    ]
    body, boundary = _multipart(fields, [(n, b"data") for n in names])
    r = await staff.post(
        f"/tickets/{ticket}/messages",
        content=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}",
                 "HX-Request": "true", "X-CSRF-Token": staff.csrf},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    (_, reply) = await _messages(rt, ticket)
    stored = await _rows(
        rt, "SELECT filename FROM message_attachment WHERE message_id = :m ORDER BY id", m=reply.id
    )
    cleaned = [n.filename for n in stored]
    assert cleaned[:4] == ["passwd", "report.txt", "nulbyte.txt", "txt.exe"]
    assert cleaned[5] == "file"
    assert all("/" not in n and "\\" not in n and "\x00" not in n for n in cleaned)
    assert "<img" not in r.text and "&lt;img src=x onerror=alert(1)&gt;.txt" in r.text


async def test_staff_reply_and_mark_pending(page_as, world, rt) -> None:
    ticket, _first = await _open(rt, world)
    staff = await page_as(world.staff)
    r = await _reply(staff, ticket, "Waiting for your logs.", set_status="PENDING")
    assert r.status_code == 200
    assert await _status(rt, ticket) == "PENDING"
    # The change shows in the thread, and Details come back out of band with the new status.
    assert "Staff changed the status from Open to Pending" in r.text
    fields = r.text[r.text.index('<section id="ticket-fields"') :]
    assert fields.startswith(
        '<section id="ticket-fields" class="card" aria-labelledby="fields-h" hx-swap-oob="true">'
    )
    assert '<option value="PENDING" selected>' in fields
    r = await _reply(staff, ticket, "Fixed.", set_status="RESOLVED")
    assert r.status_code == 200 and await _status(rt, ticket) == "RESOLVED"


async def test_a_customer_reply_reopens_a_resolved_ticket(page_as, world, rt) -> None:
    ticket = world.tickets["resolved"]
    customer = await page_as(world.customer)
    page = (await customer.get(f"/tickets/{ticket}")).text
    assert "This ticket is resolved. Replying reopens it." in page
    r = await _reply(customer, ticket, "It is back again.")
    assert r.status_code == 200
    assert await _status(rt, ticket) == "OPEN"
    assert "Customer changed the status from Resolved to Open" in r.text


async def test_a_customer_cannot_reply_to_a_closed_ticket(page_as, world, rt) -> None:
    ticket, first = await _open(rt, world)
    await (await page_as(world.staff)).hx_post(f"/tickets/{ticket}", data={"status": "CLOSED"})
    assert await _status(rt, ticket) == "CLOSED"
    customer = await page_as(world.customer)
    page = (await customer.get(f"/tickets/{ticket}")).text
    assert "This ticket is closed." in page and '<form id="reply"' not in page
    r = await customer.hx_post(f"/tickets/{ticket}/messages", data={"body": "Hello?"})
    assert r.status_code == 422 and "open a new ticket" in r.text
    assert [m.id for m in await _messages(rt, ticket)] == [first]


@pytest.mark.parametrize("body", ["", "   \n\t  "])
async def test_an_empty_reply_says_what_to_fix(page_as, world, rt, body) -> None:
    ticket, first = await _open(rt, world)
    staff = await page_as(world.staff)
    r = await _reply(staff, ticket, body, internal="on")
    assert r.status_code == 422
    assert r.headers["hx-retarget"] == "#reply" and r.headers["hx-reswap"] == "outerHTML"
    assert r.text.startswith('<form id="reply"')
    assert 'aria-invalid="true" aria-describedby="err-body"' in r.text
    assert (
        '<p class="field-error" id="err-body" role="alert">write a message (or attach a file)</p>'
        in r.text
    )
    assert 'type="checkbox" name="internal" checked' in r.text  # the toggle is kept
    # ... and so is what it switches: the button adds a note (ui/static/thread.js switches back).
    assert (
        '<span class="as-reply" hidden>Reply</span><span class="as-note">Add note</span>' in r.text
    )
    assert 'value="PENDING" class="as-reply" hidden>' in r.text
    assert [m.id for m in await _messages(rt, ticket)] == [first]
    # Without htmx: the whole page, with the same message.
    plain = await staff.post(
        f"/tickets/{ticket}/messages", data={"body": body, "csrf_token": staff.csrf}
    )
    assert plain.status_code == 422 and "write a message (or attach a file)" in plain.text
    assert "<html" in plain.text


async def test_a_reply_with_nul_keeps_the_text_and_says_why(page_as, world, rt) -> None:
    ticket, first = await _open(rt, world)
    r = await _reply(await page_as(world.staff), ticket, "before\x00after")
    assert r.status_code == 422
    assert "before\ufffdafter" in r.text
    assert [m.id for m in await _messages(rt, ticket)] == [first]


@asynccontextmanager
async def _capped(settings, clock, **caps: Any) -> AsyncIterator[Any]:
    """The app with these message caps; `as_(user)` gives a signed-in page on it."""
    app = create_app(load_settings(**(settings.model_dump() | caps)))
    async with app.router.lifespan_context(app):
        app.state.runtime.clock = clock
        opened: list[Page] = []

        async def as_(user_id: int) -> Page:
            page = Page(transport=httpx.ASGITransport(app=app), base_url="http://test")
            page.cookies.set(SESSION_COOKIE, (found := signed_in(app.state.settings, user_id))[0])
            page.csrf = found[1]
            opened.append(page)
            return page

        try:
            yield as_
        finally:
            for page in opened:
                await page.aclose()


CAPS = {"message_max_files": 2, "attachment_max_bytes": 1024, "message_max_bytes": 1536}


async def test_too_many_or_too_large_files_are_413_and_say_which_limit(
    settings, clock, world, rt
) -> None:
    ticket, first = await _open(rt, world)
    async with _capped(settings, clock, **CAPS) as as_:
        staff = await as_(world.staff)

        def files(*sizes: int) -> list[Any]:
            return [("files", (f"f{i}.txt", b"x" * n, "text/plain")) for i, n in enumerate(sizes)]

        cases = [
            (files(10, 10, 10), "Too many files: at most 2 per message."),
            (files(1025), "A file is too large: each file can be at most 1 KiB."),
            (files(1000, 1000), "The files are too large together: at most 1.5 KiB per message."),
        ]
        for sent, says in cases:
            r = await _reply(staff, ticket, "Logs attached", files=sent)
            assert r.status_code == 413, (says, r.text)
            assert says in r.text
            assert "Your text is kept; choose the files again." in r.text
            assert ">Logs attached</textarea>" in r.text
            assert r.headers["hx-retarget"] == "#reply"
        # Past the form parser's own cap on file parts (twice the message's, and two): the same
        # 413, though the form was never read, so no text is kept (and none is claimed).
        r = await _reply(staff, ticket, "Logs attached", files=files(*[10] * 7))
        assert r.status_code == 413 and "Too many files: at most 2 per message." in r.text
        assert "Your text is kept" not in r.text and "></textarea>" in r.text
        assert [m.id for m in await _messages(rt, ticket)] == [first]
        assert await _rows(rt, "SELECT id FROM message_attachment") == []
        # Within the caps it goes through.
        r = await _reply(staff, ticket, "Logs attached", files=files(1000, 500))
        assert r.status_code == 200


async def test_a_new_ticket_over_the_file_caps_is_not_made(settings, clock, world, rt) -> None:
    async with _capped(settings, clock, **CAPS) as as_:
        customer = await as_(world.customer)
        before = await _rows(rt, "SELECT id FROM ticket")
        for sent, says in [
            ([("files", (f"{i}.txt", b"x", "text/plain")) for i in range(3)], "at most 2 files"),
            (
                [("files", ("big.bin", b"x" * 2000, "application/octet-stream"))],
                "larger than 1 KiB",
            ),
            (
                [("files", (f"{i}.txt", b"x" * 1000, "text/plain")) for i in range(2)],
                "at most 1.5 KiB in all",
            ),
        ]:
            r = await customer.hx_post(
                "/tickets", data={"title": "Broken", "body": "See files"}, files=sent
            )
            assert r.status_code == 413 and says in r.text
            assert 'id="err-files"' in r.text and ">See files</textarea>" in r.text
        # Past the form parser's own cap: the same 413, with no text claimed kept.
        many = [("files", (f"{i}.txt", b"x", "text/plain")) for i in range(7)]
        r = await customer.hx_post("/tickets", data={"title": "Broken"}, files=many)
        assert r.status_code == 413 and "at most 2 files per message" in r.text
        assert "Your text is kept" not in r.text
        assert await _rows(rt, "SELECT id FROM ticket") == before
        assert await _rows(rt, "SELECT id FROM message_attachment") == []


async def test_new_ticket_with_a_file(page_as, world, rt) -> None:
    customer = await page_as(world.customer)
    form = (await customer.get("/tickets/new")).text
    assert 'enctype="multipart/form-data"' in form and 'name="files"' in form
    r = await customer.hx_post(
        "/tickets",
        data={"title": "Printer jams", "body": "See the photo.", "priority": "HIGH"},
        files=[("files", ("../jam.png", b"\x89PNG\r\n\x1a\nrest", "image/png"))],
    )
    assert r.status_code == 204, r.text
    ticket = int(r.headers["hx-redirect"].removeprefix("/tickets/"))
    (message,) = await _messages(rt, ticket)
    assert message.body == "See the photo." and message.attachment_count == 1
    (stored,) = await _rows(
        rt, "SELECT id, filename, content_type FROM message_attachment WHERE message_id = :m",
        m=message.id,
    )  # fmt: skip
    assert (stored.filename, stored.content_type) == ("jam.png", "image/png")
    page = (await (await page_as(world.staff)).get(f"/tickets/{ticket}")).text
    assert (
        "See the photo." in page
        and f'<a href="/attachments/{stored.id}" download>jam.png</a>' in page
    )
    # Without a file, and a bad title: the form again, nothing made.
    r = await customer.hx_post("/tickets", data={"title": " ", "body": "x"})
    assert r.status_code == 422 and 'id="ticket-form"' in r.text


async def test_admin_redacts_and_staff_may_not(page_as, world, rt) -> None:
    ticket, _first = await _open(rt, world)
    posted = await conversation.post_message(rt, world.customer, ticket, "My password is hunter2")
    mid = posted.message.id
    staff, admin = await page_as(world.staff), await page_as(world.admin)
    staff_page = (await staff.get(f"/tickets/{ticket}")).text
    assert f"/messages/{mid}/redact" not in staff_page
    r = await staff.hx_post(f"/tickets/{ticket}/messages/{mid}/redact")
    assert r.status_code == 403
    assert (await _messages(rt, ticket))[-1].redacted_at is None

    assert f"/messages/{mid}/redact" in (await admin.get(f"/tickets/{ticket}")).text
    r = await admin.hx_post(f"/tickets/{ticket}/messages/{mid}/redact")
    assert r.status_code == 200
    assert r.text.startswith(f'<li class="post redacted" id="msg-{mid}"')
    assert "Redacted by Admin" in r.text and "hunter2" not in r.text
    row = (await _messages(rt, ticket))[-1]
    assert row.body == "" and row.redacted_at is not None
    page = (await (await page_as(world.customer)).get(f"/tickets/{ticket}")).text
    assert "hunter2" not in page and "Redacted by Admin" in page


async def test_retry_is_for_staff_and_needs_a_failed_mail(page_as, world, rt) -> None:
    ticket, _first = await _open(rt, world)
    posted = await conversation.post_message(rt, world.staff, ticket, "Answer")
    mid = posted.message.id
    r = await (await page_as(world.customer)).hx_post(f"/tickets/{ticket}/messages/{mid}/retry")
    assert r.status_code == 403
    r = await (await page_as(world.staff)).hx_post(f"/tickets/{ticket}/messages/{mid}/retry")
    assert r.status_code == 422 and "nothing to retry" in r.text
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE background_task SET status = 'FAILED', last_error = '550 no such user' "
                    "WHERE id = ANY(:ids)"),
            {"ids": posted.email_task_ids},
        )  # fmt: skip
    staff = await page_as(world.staff)
    assert "Retry sending" in (await staff.hx_get(f"/tickets/{ticket}/messages/{mid}")).text
    r = await staff.hx_post(f"/tickets/{ticket}/messages/{mid}/retry")
    assert r.status_code == 200 and r.text.startswith(f'<div class="delivery" id="dlv-{mid}"')
    assert "Retry sending" not in r.text


async def _same_as_missing(page: Page, ticket: int, message: int) -> None:
    routes = [
        ("GET", "/tickets/{t}"),
        ("GET", "/tickets/{t}/thread?after=0"),
        ("GET", "/tickets/{t}/thread?before={m}"),
        ("GET", "/tickets/{t}/messages/{m}"),
        ("GET", "/tickets/{t}/live"),
        ("POST", "/tickets/{t}/messages"),
        ("POST", "/tickets/{t}/messages/{m}/retry"),
        ("POST", "/tickets/{t}/messages/{m}/redact"),
    ]
    for method, route in routes:
        for hx in (False, True):
            answers = []
            for t in (ticket, MISSING):
                url = route.format(t=t, m=message)
                if method == "GET":
                    r = await (page.hx_get(url) if hx else page.get(url))
                elif hx:
                    r = await page.hx_post(url, data={"body": "hi", "internal": "on"})
                else:
                    r = await page.post(url, data={"body": "hi", "csrf_token": page.csrf})
                answers.append(r)
            seen, missing = answers
            assert seen.status_code == missing.status_code == 404, (method, route, hx)
            assert seen.text == missing.text, (method, route, hx)
            assert "Ticket not found" in seen.text or "not found" in seen.text.lower()


@pytest.mark.parametrize("who", ["outsider", "customer2"])
async def test_who_may_not_see_the_ticket_gets_the_missing_ones_404(
    page_as, world, rt, who
) -> None:
    ticket, first = await _open(rt, world)
    await _same_as_missing(await page_as(getattr(world, who)), ticket, first)
    assert [m.id for m in await _messages(rt, ticket)] == [first]


async def _add_messages(rt, world, ticket: int, n: int) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO ticket_message (ticket_id, team_id, author_id, internal, body, created_at) "
                "SELECT :t, :team, :a, false, 'Message number ' || g, now() + g * interval '1 second' "
                "FROM generate_series(1, :n) g"
            ),
            {"t": ticket, "team": world.team, "a": world.customer, "n": n},
        )


async def test_the_thread_opens_on_its_newest_window_and_loads_earlier_ones(
    page_as, world, rt
) -> None:
    ticket, first = await _open(rt, world)
    await _add_messages(rt, world, ticket, 2 * WINDOW + 3)
    every = [m.id for m in await _messages(rt, ticket)]
    staff = await page_as(world.staff)
    page = (await staff.get(f"/tickets/{ticket}")).text
    assert _ids_shown(page) == every[-WINDOW:]
    button = re.search(r'hx-get="(/tickets/\d+/thread\?before=(\d+))"', page)
    assert button is not None and int(button.group(2)) == every[-WINDOW]
    earlier = await staff.hx_get(button.group(1))
    assert earlier.status_code == 200
    assert _ids_shown(earlier.text) == every[-2 * WINDOW : -WINDOW]
    assert earlier.text.lstrip().startswith('<li id="earlier"')  # it replaces the button
    button = re.search(r'hx-get="(/tickets/\d+/thread\?before=(\d+))"', earlier.text)
    assert button is not None
    last = await staff.hx_get(button.group(1))
    assert _ids_shown(last.text) == every[: -2 * WINDOW] and first in _ids_shown(last.text)
    assert "Show earlier messages" not in last.text
    # Without htmx the address is the ticket's page.
    plain = await staff.get(button.group(1), follow_redirects=False)
    assert plain.status_code == 303 and plain.headers["location"] == f"/tickets/{ticket}"


async def test_the_page_catches_up_with_what_is_newer(page_as, world, rt) -> None:
    ticket, first = await _open(rt, world)
    staff = await page_as(world.staff)
    nothing = await staff.hx_get(f"/tickets/{ticket}/thread?after={first}")
    assert nothing.status_code == 204 and "x-thread-at" in nothing.headers
    posted = await conversation.post_message(rt, world.customer, ticket, "Any news?")
    newer = await staff.hx_get(f"/tickets/{ticket}/thread?after={first}")
    assert newer.status_code == 200 and _ids_shown(newer.text) == [posted.message.id]
    # A page far behind reads itself again rather than show a gap.
    await _add_messages(rt, world, ticket, WINDOW + 1)
    behind = await staff.hx_get(f"/tickets/{ticket}/thread?after={first}")
    assert behind.status_code == 204 and behind.headers["hx-refresh"] == "true"
    bad = await staff.hx_get(f"/tickets/{ticket}/thread?after=0&d=1,x")
    assert bad.status_code == 422
