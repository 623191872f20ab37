"""No 500s from odd characters on the pages (issue 12, point 5): NUL bytes, lone surrogates,
`²`, 5,000-digit and out-of-range numbers in every query parameter, path id and form field give
a 4xx page or form message; a malformed `taskdesk_team` cookie is ignored on every page."""

from __future__ import annotations

from urllib.parse import quote

import pytest

ODD = {
    "nul": "bad\x00value",
    "surrogate": "bad\ud800value",
    "superscript": "²",
    "huge": "9" * 5000,
    "int4": "99999999999",
    "control": "bell\x07",
}

# GET pages and the query parameters each reads.
QUERIES = {
    "/tickets": ("after", "start", "status", "priority", "assignment", "assignee_id", "q"),
    "/tasks": ("limit", "after", "newer_than"),
    "/imports": ("limit", "newer_than"),
    "/notifications": ("after",),
    "/notifications/badge": ("seen",),
}
# Paths with an id in them ({} is replaced by the odd value).
PATHS = (
    "/tickets/{}",
    "/tasks/{}",
    "/tasks/{}/download",
    "/tasks/{}/report",
    "/invitations/{}",
    "/password/reset/{}",
)
# POST forms and their fields ({t} is a real ticket id).
FORMS = {
    "/tickets": ("title", "body", "priority"),
    "/tickets/{t}": ("status", "priority", "assignee_id"),
    "/tickets/{t}/reminder": ("preset", "at", "note"),
    "/exports": ("status", "priority", "assignment", "assignee_id", "q"),
    "/members": ("email", "role"),
    "/members/invitations": ("email", "role"),
    "/password/forgot": ("email",),
    "/tokens": ("name",),
    "/notifications/read": ("id",),
    "/settings/notifications": ("export_ready_email", "reminder_email"),
}
POST_PATHS = (
    "/tickets/{}",
    "/tickets/{}/reminder/cancel",
    "/tasks/{}/cancel",
    "/tasks/{}/retry",
    "/members/{}/role",
    "/members/{}/remove",
    "/tokens/{}/revoke",
    "/members/invitations/{}/revoke",
    "/invitations/{}",
    "/password/reset/{}",
)
LEAKS = ("psycopg", "sqlalchemy", "Traceback", "SELECT ", "INSERT ", "%(")


def _q(value: str) -> str:
    return quote(value.encode("utf-8", "surrogatepass"), safe="")


def _check(response) -> None:
    assert response.status_code < 500, (response.request.url, response.text[:300])
    for leak in LEAKS:
        assert leak not in response.text, (response.request.url, response.text[:300])


@pytest.mark.parametrize("value", list(ODD.values()), ids=list(ODD))
async def test_odd_query_parameters_and_path_ids_answer_4xx(page_as, world, value) -> None:
    page = await page_as(world.admin)
    for path, params in QUERIES.items():
        for name in params:
            for hx in (False, True):
                url = f"{path}?{name}={_q(value)}"
                _check(await (page.hx_get(url) if hx else page.get(url)))
    for template in PATHS:
        _check(await page.get(template.format(_q(value))))


@pytest.mark.parametrize("value", [*ODD.values(), "99999999999999999999"], ids=[*ODD, "int8"])
async def test_odd_parts_of_a_watched_row_answer_4xx(page_as, world, value) -> None:
    """Each part of the page watcher's `id:since:version:cancel` row token, odd: a 4xx saying
    how a row is spelled (an id past any task's once reached the database: a 500)."""
    page = await page_as(world.admin)
    good = ["1", "1.0", "abc", "1"]
    for i in range(4):
        parts = [*good[:i], value, *good[i + 1 :]]
        response = await page.hx_get(f"/watch?r={_q(':'.join(parts))}&bell=0")
        _check(response)
        if i == 0:  # no task has such an id: told how a row is spelled, nothing read
            assert response.status_code == 422, response.text[:300]


@pytest.mark.parametrize("value", list(ODD.values()), ids=list(ODD))
async def test_odd_form_fields_answer_4xx(page_as, world, value) -> None:
    page = await page_as(world.admin)
    ticket = world.tickets["login"]
    for template, fields in FORMS.items():
        for name in fields:
            # surrogatepass: a browser cannot send a lone surrogate, but a client can send its bytes
            body = f"{name}={_q(value)}&title=ok&preset=60"
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            for hx in (False, True):
                url = template.format(t=ticket)
                if hx:
                    response = await page.hx_post(url, content=body.encode(), headers=headers)
                else:
                    headers_csrf = headers | {"X-CSRF-Token": page.csrf}
                    response = await page.post(url, content=body.encode(), headers=headers_csrf)
                _check(response)
    for template in POST_PATHS:
        _check(await page.hx_post(template.format(_q(value)), data={"role": "STAFF"}))


@pytest.mark.parametrize(
    "url, field, value",
    [
        ("/members", "email", "olga\x00@globex.test"),
        ("/members", "email", "olga@globex.test\x00"),
        ("/tokens", "name", "CI\x00script"),
    ],
)
async def test_a_nul_in_a_form_field_is_the_form_s_own_error(page_as, world, url, field, value):
    # `@` and all: the check for an address must not be what stops a NUL (issue 24, point 2);
    # a plain post (no htmx) gets its page with the form's message, not a redirect that loses it.
    page = await page_as(world.admin)
    body = f"{field}={_q(value)}&role=STAFF".encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    plain = await page.post(url, content=body, headers=headers | {"X-CSRF-Token": page.csrf})
    fragment = await page.hx_post(url, content=body, headers=headers)
    for r in (plain, fragment):
        assert r.status_code == 422, r.text[:300]
        assert f'id="err-{field}"' in r.text and "NUL character" in r.text
        assert 'aria-invalid="true"' in r.text
    assert "<h1>" in plain.text and "<h1>" not in fragment.text  # the page; its form's block


@pytest.mark.parametrize("cookie", ["²", "9" * 5000, "99999999999", "-1", "1e9", "\x00", "abc"])
async def test_a_malformed_team_cookie_is_ignored_on_every_page(page_as, world, cookie) -> None:
    page = await page_as(world.staff)
    session = "; ".join(f"{k}={v}" for k, v in page.cookies.items())
    # Raw bytes, as a script may send them (servers read header bytes as latin-1: 0xB2 is ²).
    header = f"{session}; taskdesk_team={cookie}".encode("latin-1")
    page.cookies.clear()
    for path in ("/tickets", "/tasks", "/notifications", "/imports", "/tickets/new", "/members"):
        for hx in ({}, {"HX-Request": "true"}):
            response = await page.get(path, headers={"Cookie": header, **hx})
            assert response.status_code < 500, (path, response.text[:300])
    listing = await page.get("/tickets", headers={"Cookie": header})
    assert listing.status_code == 200 and "Cannot log in" in listing.text  # the first team


@pytest.mark.parametrize("token", ["é", "bad\ud800value", "日本"])
async def test_a_non_ascii_csrf_token_is_refused_not_a_500(page_as, world, token) -> None:
    # hmac.compare_digest raises TypeError for non-ASCII str: a forged token must be a 403.
    anonymous = await page_as(None)
    form = anonymous.get("/login")
    assert (await form).status_code == 200
    body = f"email=a%40b.test&password=x&csrf_token={_q(token)}"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    r = await anonymous.post("/login", content=body.encode(), headers=headers)
    assert r.status_code == 403, r.text[:300]
    page = await page_as(world.staff)
    r = await page.post(
        "/tickets", content=f"title=x&csrf_token={_q(token)}".encode(), headers=headers
    )
    assert r.status_code == 403, r.text[:300]
    if token.encode("latin-1", "ignore").decode("latin-1") == token:  # a header is latin-1
        latin1 = token.encode("latin-1")  # as a script sends it; the server reads latin-1
        r = await page.post("/tickets", data={"title": "x"}, headers={"X-CSRF-Token": latin1})
        assert r.status_code == 403, r.text[:300]
