"""`python -m bench.load.idle_page`: requests per idle page per minute, measured in a browser.

A real tasks page (nothing unfinished on it) is opened in headless Debian chromium against the
web app on the benchmark's servers and a scratch database; every request the page makes is
counted for `--seconds` while the tab is visible, then as long again while it is hidden (the
tab's `document.hidden` is emulated, as the browser tests do). Issue 11's targets: ≤ 15 a
minute visible, ≤ 2 hidden. Prints the figures and writes them to
bench/results/idle-page-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from bench import env
from bench.harness import runtime
from bench.load import setup
from bench.stats import machine
from bench.web import OURS, serve, session_cookie

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
HIDE = """(hidden) => {
    Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
    Object.defineProperty(document, "visibilityState",
        {configurable: true, get: () => hidden ? "hidden" : "visible"});
    document.dispatchEvent(new Event("visibilitychange"));
}"""


async def measure(base: str, cookie: str, seconds: float) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    name, _, value = cookie.partition("=")
    seen: list[tuple[float, str]] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            context = await browser.new_context(base_url=base)
            await context.add_cookies([{"name": name, "value": value, "url": base}])
            page = await context.new_page()
            page.on("request", lambda r: seen.append((time.monotonic(), r.url)))
            t0 = time.monotonic()
            await page.goto("/tasks")
            await asyncio.sleep(seconds)  # the measurement window
            t1 = time.monotonic()
            await page.evaluate(HIDE, True)
            await asyncio.sleep(seconds)
            t2 = time.monotonic()
        finally:
            await browser.close()

    def after_load(a: float, b: float) -> list[str]:
        return [u.split("?")[0].replace(base, "") for t, u in seen if a <= t < b]

    visible = [u for u in after_load(t0, t1) if not u.startswith("/static/")]
    hidden = after_load(t1, t2)
    per_min = 60.0 / seconds
    return {
        "seconds": seconds,
        "visible_per_minute": round((len(visible) - 1) * per_min, 1),  # less the page itself
        "hidden_per_minute": round(len(hidden) * per_min, 1),
        "visible_requests": dict(Counter(visible)),
        "hidden_requests": dict(Counter(hidden)),
    }


async def _main(args: argparse.Namespace) -> int:
    servers = await asyncio.to_thread(env.open_servers)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = env.ROOT / "bench" / "results" / "logs" / f"idle-page-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        name, url = await asyncio.to_thread(env.empty_db, servers, logs / "seed.log")
        try:
            settings = env.settings_for(url, servers.redis_url, env.new_prefix("idle"))
            async with runtime(settings) as rt:
                _, (user,) = await setup.create_team(rt, 1)
                cookie = session_cookie(settings, user)
            with serve(OURS, env.worker_env(settings), logs / "web.log") as web:
                figures = await measure(web.url, cookie, args.seconds)
        finally:
            await asyncio.to_thread(env.drop_db, servers, name)
    finally:
        await asyncio.to_thread(servers.close)
    print(
        f"requests per idle page per minute: visible {figures['visible_per_minute']:g} "
        f"(target ≤ 15), hidden {figures['hidden_per_minute']:g} (target ≤ 2); "
        f"measured in headless chromium, {args.seconds:g} s each"
    )
    print(f"  visible: {figures['visible_requests']}\n  hidden: {figures['hidden_requests']}")
    path = env.ROOT / "bench" / "results" / f"idle-page-{stamp}.json"
    path.write_text(json.dumps({"when": stamp, "machine": machine(), **figures}, indent=2))
    print(f"JSON: {path.relative_to(env.ROOT)}")
    ok = figures["visible_per_minute"] <= 15 and figures["hidden_per_minute"] <= 2
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.load.idle_page", description=__doc__)
    p.add_argument("--seconds", type=float, default=60.0)
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
