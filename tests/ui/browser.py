"""Browser-test support: a real uvicorn server process, headless Debian chromium through
Playwright, and people with passwords to sign in as."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people.passwords import hash_password
from tests.helpers import serving

if TYPE_CHECKING:
    from playwright.async_api import Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "correct horse battery"


def chromium_missing() -> bool:
    return not os.path.exists(CHROMIUM)


def browser_required() -> bool:
    """CI sets TASKDESK_REQUIRE_BROWSER=1: a browser test that cannot run fails (tests/conftest.py)."""
    return os.environ.get("TASKDESK_REQUIRE_BROWSER") == "1"


needs_chromium = pytest.mark.skipif(
    chromium_missing() and not browser_required(),
    reason=f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`)",
)


@contextmanager
def running_server(settings: Settings, log_path: Path) -> Iterator[str]:
    """The web app on a free port with the test's settings; yields its URL."""
    with serving(settings, log_path) as url:
        yield url


async def give_passwords(rt: Runtime) -> None:
    """Every user of the test world signs in with PASSWORD (one argon2 hash, shared)."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET password_hash = :h"), {"h": hash_password(PASSWORD)}
        )


@asynccontextmanager
async def browser_page(base_url: str) -> AsyncIterator[Page]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(
                base_url=base_url, viewport={"width": 1280, "height": 860}, accept_downloads=True
            )
            context.set_default_timeout(15_000)
            yield await context.new_page()
        finally:
            await browser.close()


async def sign_in(page: Page, email: str) -> None:
    await page.goto("/login")
    await page.get_by_label("E-mail").fill(email)
    await page.get_by_label("Password").fill(PASSWORD)
    await page.get_by_role("button", name="Sign in").click()


async def hide(page: Page, hidden: bool) -> None:
    """Emulate the tab going to the background (or coming back): what the browser would say."""
    await page.evaluate(
        """(hidden) => {
            Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
            Object.defineProperty(document, "visibilityState",
                {configurable: true, get: () => hidden ? "hidden" : "visible"});
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )
