"""GraphiQL at /graphql in a real browser, as on a network without internet: every request that
leaves the loopback interface is aborted and recorded, and the test fails if there was any.
The editor must still render, and a query sent with the signed-in session's cookie must come
back with that person's data."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from desk.core.clock import utcnow
from tests.ui.browser import browser_page, give_passwords, needs_chromium, running_server, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
ME = "{ me { displayName memberships { role team { name } } } }"


@pytest.fixture
async def site(rt, world, settings, tmp_path):
    rt.clock = utcnow
    await give_passwords(rt)
    with running_server(settings, tmp_path / "server.log") as url:
        yield url


async def offline(page) -> list[str]:
    """Abort (and list) every request to a host other than this machine's loopback."""
    off_site: list[str] = []

    async def guard(route) -> None:
        url = route.request.url
        if urlsplit(url).hostname in LOOPBACK:
            await route.continue_()
        else:
            off_site.append(url)
            await route.abort("internetdisconnected")

    await page.context.route("**/*", guard)
    return off_site


async def test_graphiql_works_offline_with_the_session_cookie(site) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        off_site = await offline(page)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # The page's own policy must not block anything GraphiQL needs.
        page.on(
            "console",
            lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
        )
        await sign_in(page, "chen@acme.test")
        await page.wait_for_url("**/tickets")

        await page.goto("/graphql")
        editor = page.locator(".graphiql-query-editor .CodeMirror")
        await expect(editor).to_be_visible(timeout=30_000)
        await expect(editor).to_contain_text("query Me")  # the welcome text, first visit
        await expect(page.locator("#graphiql")).not_to_contain_text("Loading")

        await page.goto("/graphql?query=" + ME.replace(" ", "%20"))
        await expect(editor).to_contain_text("displayName", timeout=30_000)
        await page.locator(".graphiql-execute-button").click()
        result = page.locator(".graphiql-response")
        await expect(result).to_contain_text('"displayName": "Staff"', timeout=30_000)
        await expect(result).to_contain_text('"name": "Acme"')

    assert off_site == [], f"GraphiQL asked the internet for {off_site}"
    assert errors == [], f"script errors on the GraphiQL page: {errors}"


async def test_graphiql_without_a_session_says_sign_in(site) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        off_site = await offline(page)
        await page.goto("/graphql?query=" + ME.replace(" ", "%20"))
        editor = page.locator(".graphiql-query-editor .CodeMirror")
        await expect(editor).to_contain_text("displayName", timeout=30_000)
        await page.locator(".graphiql-execute-button").click()
        await expect(page.locator(".graphiql-response")).to_contain_text(
            "UNAUTHENTICATED", timeout=30_000
        )
    assert off_site == []
