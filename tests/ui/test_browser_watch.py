"""The page watcher in a real browser (headless chromium, a real server and worker): one
`/watch` request per tick and no other timer; an idle page asks every 5 s (≤ 15 a minute); a
task started elsewhere shows; a row follows its task to completion; a hidden tab stops asking
and catches up at once when shown; a 503 with Retry-After makes it wait and carry on."""

from __future__ import annotations

import itertools
import time

import pytest

from desk.core.clock import utcnow
from desk.work import tasks
from tests.helpers import running_workers, wait_for
from tests.ui.browser import (
    browser_page,
    give_passwords,
    hide,
    needs_chromium,
    running_server,
    sign_in,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow, needs_chromium]

SLOW = 30_000  # ms


@pytest.fixture
async def site(rt, world, settings, tmp_path):
    rt.clock = utcnow
    await give_passwords(rt)
    with running_server(settings, tmp_path / "server.log") as url:
        yield url


class Requests:
    """What the page asks, with when (monotonic seconds) and how it was answered."""

    def __init__(self, page) -> None:
        self.seen: list[tuple[float, str]] = []
        self.answers: list[tuple[str, int]] = []
        page.on("request", lambda r: self.seen.append((time.monotonic(), r.url)))
        page.on("response", lambda r: self.answers.append((r.url, r.status)))

    def since(self, t0: float) -> list[tuple[float, str]]:
        return [(t, u) for t, u in self.seen if t >= t0]

    def watches(self, t0: float) -> list[float]:
        return [t for t, u in self.since(t0) if "/watch?" in u]


async def open_tasks(page) -> None:
    await sign_in(page, "chen@acme.test")
    await page.wait_for_url("**/tickets")
    await page.goto("/tasks")
    await page.locator("#health[data-v='1-0'], #health[data-v='1-1']").wait_for()


async def test_an_idle_page_asks_once_per_tick_every_five_seconds(site, rt, world) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        asked = Requests(page)
        await open_tasks(page)
        await expect(page.locator("#bell")).to_have_attribute("data-seen", "0")
        t0 = time.monotonic()

        async def four_ticks() -> bool:
            return len(asked.watches(t0)) >= 4

        await wait_for(four_ticks, timeout=60, what="four idle ticks")
        window = asked.since(t0)
        assert window and all("/watch?" in u for _, u in window), window  # no other timer
        ticks = asked.watches(t0)
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        assert 3 <= len(ticks) <= 5, ticks  # every 5 s: ≤ 12 a minute (+1 at load)
        assert all(g >= 4.5 for g in gaps), gaps
        assert {s for u, s in asked.answers if "/watch?" in u} <= {200, 204}

        # A task started elsewhere (GraphQL, another tab) shows within the idle tick.
        task = await tasks.create_export(rt, world.staff, world.team, {})
        row = page.locator(f"#task-{task.id}")
        await expect(row).to_have_attribute("data-status", "Queued", timeout=7_000)
        await expect(row).to_have_attribute("data-poll", "")


async def test_a_row_follows_its_task_to_completion_with_one_request_per_tick(
    site, rt, world, settings, tmp_path
) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        asked = Requests(page)
        await open_tasks(page)
        await page.get_by_role("link", name="Tickets").click()
        await page.get_by_role("button", name="Export these tickets").click()
        row = page.locator("#tasks .task").first
        await expect(row).to_have_attribute("data-status", "Queued")
        t0 = time.monotonic()
        with running_workers(settings, tmp_path):
            await expect(row).to_have_attribute("data-status", "Completed", timeout=SLOW)
        await expect(row).not_to_have_attribute("data-poll", "")
        await expect(row.get_by_role("link", name="Download CSV")).to_be_visible()
        await expect(page.locator("#announcer")).to_contain_text("Completed")
        window = asked.since(t0)
        assert all("/watch?" in u for _, u in window), window  # rows have no timers of their own
        ticks = asked.watches(t0)
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        assert all(g >= 0.5 for g in gaps), gaps  # one request per tick, never a burst


async def test_a_hidden_tab_stops_asking_and_catches_up_when_shown(site, rt, world) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        asked = Requests(page)
        await page.clock.install()  # the page's timers run on a clock the test moves
        await open_tasks(page)
        await hide(page, True)
        t0 = time.monotonic()
        task = await tasks.create_export(rt, world.staff, world.team, {})
        for _ in range(2):  # 12 s of page time; a visible page would ask at 5 s and at 10 s
            await page.clock.run_for(6_000)
            await page.wait_for_load_state("networkidle")  # its answer in, its next tick armed
        assert len(asked.watches(t0)) <= 1, asked.since(t0)  # one in flight when hidden, at most
        assert await page.locator(f"#task-{task.id}").count() == 0

        t1 = time.monotonic()
        await hide(page, False)
        await expect(page.locator(f"#task-{task.id}")).to_have_attribute(
            "data-status", "Queued", timeout=3_000
        )  # caught up at once, not at the next tick
        assert asked.watches(t1)[0] - t1 < 1.0


async def test_a_503_with_retry_after_makes_the_watcher_wait_and_carry_on(
    site, rt, world, settings, tmp_path
) -> None:
    from playwright.async_api import expect

    async with browser_page(site) as page:
        asked = Requests(page)
        await open_tasks(page)
        refused: list[float] = []

        async def overloaded_once(route) -> None:
            if not refused:
                refused.append(time.monotonic())
                await route.fulfill(status=503, headers={"Retry-After": "3"}, body="busy")
            else:
                await route.continue_()

        task = await tasks.create_export(rt, world.staff, world.team, {})
        await page.route("**/watch?*", overloaded_once)
        await wait_for(lambda: _true(bool(refused)), timeout=10, what="the refused tick")
        with running_workers(settings, tmp_path):
            row = page.locator(f"#task-{task.id}")
            await expect(row).to_have_attribute("data-status", "Completed", timeout=SLOW)
        after = [t for t in asked.watches(refused[0]) if t > refused[0] + 0.01]
        assert after and after[0] - refused[0] >= 2.9, (refused, after)  # waited Retry-After
        await expect(page.locator("#flash")).to_be_empty()  # nothing on the page broke


async def _true(value: bool) -> bool:
    return value
