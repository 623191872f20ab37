"""unchanged-tick: the page watcher's tick that finds nothing changed, answered from the web
process's memory of the change feed (docs/architecture.md, "Change feed", "Polling").

A staff person of a team of their own has the tasks page open with 5 unfinished exports (made by
`desk.work.tasks.create_export`). The bench loads `/tasks` as a browser does and builds the watch
URL as ui.js `watchUrl` does (the rows, `bell`, `h`, `list`, `newest`, `mark`, `limit`), ticks
until an answer is 204 (the first tick reads the database and teaches the memory) and carries
that answer's `X-Watch-Mark` on: later identical ticks are the memory's alone. Before timing it
checks that they answer 204 and, once, that 200 of them ran no statement (PostgreSQL's
transaction count of the run's database before and after; see `_statements`), and after the
timing that the tick still answers 204.

Then wrk (32 connections) drives that URL against our web process and bench/baseline_app.py's
bare row read (`GET /task/{id}`), in turns of alternating order; the figure is each server's CPU
time per request (/proc, around its own turns: a shared machine moves req/s much more than CPU
per request), req/s in the note. Each wrk script counts any answer but 204 (ours) / 200 (the
baseline) as a failure.

`team_with_exports` serves bench/b_subscribe.py too.
"""

from __future__ import annotations

import asyncio
import secrets
import statistics
import time
from html.parser import HTMLParser
from urllib.parse import quote

import httpx
import psycopg
import sqlalchemy as sa

from bench import env
from bench.harness import Ctx, runtime
from bench.procs import cpu_seconds
from bench.stats import Row, Target
from bench.web import BASELINE, OURS, check_ok, lua_request, serve, session_cookie, wrk
from desk.core.feed import Feed
from desk.core.runtime import Runtime
from desk.work import tasks

CONNECTIONS = 32
WATCHED = 5  # unfinished rows on the page
MAX_ROWS = 60  # ui/watch/watcher.py MAX_ROWS (ui.js sends at most as many)
CHECK_TICKS = 200
# PostgreSQL flushes a backend's pending statistics when it goes idle, but at most once a
# second, else after up to 10 s (PGSTAT_IDLE_INTERVAL): what the first ticks ran must have landed
# in pg_stat_database before the count starts, and what the checked ticks ran before it ends
# (with 1.5 s, 200 ticks that each ran a statement showed as 99 transactions; with 11 s, 206).
SETTLE_BEFORE = SETTLE_AFTER = 11.0
LISTENER_CHECK = Feed.HEALTH_CHECK
BADGE_TTL = (
    2.0  # ui/watch/watcher.py HEALTH_TTL: the worker badge's read, shared by a process's ticks
)


async def team_with_exports(
    rt: Runtime, tag: str, people: int, each: int
) -> tuple[int, dict[int, list[int]]]:
    """A new team of `people` staff, each with `each` queued exports of their own (the ledger's
    own accept; no worker runs, so they stay WAITING): (team id, person -> task ids)."""
    name = f"bench {tag} {secrets.token_hex(3)}"
    emails = [f"{name.replace(' ', '-')}-{i:03d}@bench.test" for i in range(people)]
    async with rt.engine.begin() as conn:
        team = (
            await conn.execute(
                sa.text("INSERT INTO team (name) VALUES (:n) RETURNING id"), {"n": name}
            )
        ).scalar_one()
        ids = (
            (
                await conn.execute(
                    sa.text(
                        "INSERT INTO app_user (email, display_name) "
                        "SELECT e, e FROM unnest(CAST(:e AS text[])) e RETURNING id"
                    ),
                    {"e": emails},
                )
            )
            .scalars()
            .all()
        )
        await conn.execute(
            sa.text(
                "INSERT INTO membership (user_id, team_id, role) "
                "SELECT u, :t, 'STAFF' FROM unnest(CAST(:ids AS int[])) u"
            ),
            {"t": team, "ids": list(ids)},
        )

    async def exports(user: int) -> list[int]:
        made = [await tasks.create_export(rt, user, team, {"q": f"{tag} {k}"}) for k in range(each)]
        return [t.id or 0 for t in made]

    # People in parallel: each accept locks only its own person's (desk.ledger.intake).
    found = await asyncio.gather(*(exports(u) for u in sorted(ids)))
    return int(team), dict(zip(sorted(ids), found, strict=True))


def cookie_of(header: str) -> tuple[str, str]:
    """`name=value` of a `Cookie` header as (name, value)."""
    name, _, value = header.partition("=")
    return name, value


class Page(HTMLParser):
    """What ui.js `watchUrl` reads from the document, in document order; fed a page, then each
    answer's fragments (they replace what they name, as htmx's out-of-band swaps do)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}  # task id -> "id:since:version:cancel"
        self.bell: str | None = None
        self.health: str | None = None
        self.listing: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        task = a.get("data-task-id")
        if task and "data-poll" in a:
            self.rows[task] = ":".join((task, a["data-since"], a["data-v"], a["data-cancel"]))
        elif task and tag == "li":
            self.rows.pop(task, None)  # a row that ended is no longer watched
        if a.get("id") == "bell":
            self.bell = a.get("data-seen") or "-1"
        elif a.get("id") == "health":
            self.health = a.get("data-v", "")
        elif a.get("id") == "tasks-watch":
            self.listing = {k: a[f"data-{k}"] for k in ("list", "newest", "limit")}

    def url(self, mark: str | None) -> str:
        """`/watch?…` exactly as ui.js builds it (encodeURIComponent on each value)."""

        def enc(s: str) -> str:
            return quote(s, safe="-_.!~*'()")

        parts = [f"r={enc(t)}" for t in list(self.rows.values())[:MAX_ROWS]]
        if self.bell is not None:
            parts.append(f"bell={enc(self.bell)}")
        if self.health is not None:
            parts.append(f"h={enc(self.health)}")
        if self.listing:
            parts += [f"list={enc(self.listing['list'])}", f"newest={enc(self.listing['newest'])}"]
            parts += [f"mark={enc(mark)}"] if mark else []
            parts.append(f"limit={enc(self.listing['limit'])}")
        return "/watch?" + "&".join(parts)


def open_page(base: str, cookie: str) -> tuple[str, str]:
    """Load `/tasks` and tick as the page would until a tick answers 204; (the watch URL that
    tick's successor sends, the `Cookie` header the browser holds)."""
    with httpx.Client(base_url=base, timeout=30) as client:
        client.cookies.set(*cookie_of(cookie))
        r = client.get("/tasks")
        assert r.status_code == 200, (r.status_code, r.text[:500])
        page = Page()
        page.feed(r.text)
        assert len(page.rows) == WATCHED and page.listing, (page.rows, page.listing)
        assert page.bell is not None and page.health is not None, "no bell or badge on the page"
        mark = None
        for _ in range(5):
            r = client.get(page.url(mark), headers={"HX-Request": "true"})
            assert r.status_code in (200, 204), (r.status_code, r.text[:500])
            mark = r.headers.get("x-watch-mark") or mark
            if r.status_code == 204:
                break
            page.feed(r.text)
            time.sleep(0.2)
        url = page.url(mark)
        header = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
        r = client.get(url, headers={"HX-Request": "true"})
        assert r.status_code == 204 and mark, (r.status_code, mark, r.text[:500])
    return url, header


def _still_unchanged(base: str, url: str, cookie: str) -> None:
    """After the timing: the same tick still answers 204 (nothing changed under load)."""
    r = httpx.get(base + url, headers={"HX-Request": "true", "Cookie": cookie}, timeout=30)
    assert r.status_code == 204, (r.status_code, r.text[:300])


def _xact(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database "
        "WHERE datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def _statements(db_url: str, base: str, url: str, cookie: str) -> tuple[int, int, float]:
    """Transactions of the run's database during CHECK_TICKS unchanged ticks (every statement
    is one: the pools run in autocommit or in explicit transactions); (seen, allowed, seconds).
    Nothing else uses this database while it runs."""
    headers = {"HX-Request": "true", "Cookie": cookie}
    with psycopg.connect(db_url, autocommit=True) as conn, httpx.Client(timeout=30) as client:
        time.sleep(SETTLE_BEFORE)
        before = _xact(conn)
        began = time.monotonic()
        for _ in range(CHECK_TICKS):
            r = client.get(base + url, headers=headers)
            assert r.status_code == 204, (r.status_code, r.text[:300])
        took = time.monotonic() - began
        time.sleep(SETTLE_AFTER)
        seen = _xact(conn) - before
    # This check's own first read; the listener's "still alive?" SELECT 1 after each 15 quiet
    # seconds of the whole window, settling included (desk/core/feed.py: on a fast machine the
    # window is 22 s and holds two); the worker badge's read, one per BADGE_TTL per process.
    window = SETTLE_BEFORE + took + SETTLE_AFTER
    allowed = 1 + int(window // LISTENER_CHECK) + 1 + int(took // BADGE_TTL) + 1
    return seen, allowed, took


def _lua(cookie: str | None, expect: int) -> str:
    headers = {"HX-Request": "true", "Cookie": cookie} if cookie else {}
    check = f"""
bad_total = 0
response = function(status, headers, body)
  if status ~= {expect} then bad_total = bad_total + 1 end
end
"""
    return lua_request("GET", headers) + check


async def _turns(
    ctx: Ctx, urls: dict[str, str], luas: dict[str, str], pids: dict[str, int]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Alternating wrk turns; (req/s, server CPU µs per request) per side."""
    seconds = ctx.sizes.http_seconds
    rps: dict[str, list[float]] = {n: [] for n in urls}
    cpu: dict[str, list[float]] = {n: [] for n in urls}
    for name in urls:  # warm-up: pools, caches, the allocator
        await asyncio.to_thread(wrk, urls[name], luas[name], CONNECTIONS, 1)
    for i in range(ctx.sizes.runs):
        for name in list(urls) if i % 2 == 0 else list(urls)[::-1]:
            began = cpu_seconds(pids[name])
            got = await asyncio.to_thread(wrk, urls[name], luas[name], CONNECTIONS, seconds)
            spent = cpu_seconds(pids[name]) - began
            check_ok(got, f"unchanged-tick {name}")
            rps[name].append(got["rps"])
            cpu[name].append(spent / max(1, got["requests"]) * 1e6)
    return rps, cpu


async def unchanged_tick(ctx: Ctx) -> list[Row]:
    settings = ctx.settings("feed-tick")
    async with runtime(settings) as rt:
        _, owned = await team_with_exports(rt, "tick", 1, WATCHED)
    (person, ids), *_ = owned.items()
    wenv = env.worker_env(settings)
    with (
        serve(OURS, wenv, ctx.log("web-feed-tick.log"), ctx.profile_to("web-feed-tick")) as ours,
        serve(BASELINE, wenv, ctx.log("baseline-feed-tick.log")) as base,
    ):
        url, cookie = await asyncio.to_thread(open_page, ours.url, session_cookie(settings, person))
        seen, allowed, took = await asyncio.to_thread(
            _statements, ctx.db_url, ours.url, url, cookie
        )
        if seen > allowed:
            raise RuntimeError(f"{CHECK_TICKS} unchanged ticks ran {seen} transactions")
        urls = {"ours": ours.url + url, "baseline": f"{base.url}/task/{ids[0]}"}
        luas = {"ours": _lua(cookie, 204), "baseline": _lua(None, 200)}
        rps, cpu = await _turns(ctx, urls, luas, {"ours": ours.pid, "baseline": base.pid})
        await asyncio.to_thread(_still_unchanged, ours.url, url, cookie)
    med = {n: statistics.median(v) for n, v in rps.items()}
    note = (
        f"{CONNECTIONS} connections, {ctx.sizes.http_seconds:g} s per turn; a page watching "
        f"{WATCHED} queued exports + bell + badge + list with mark; req/s ours "
        f"{med['ours']:,.0f}, baseline {med['baseline']:,.0f}; {CHECK_TICKS} ticks in "
        f"{took:.1f} s: {seen} transactions in the database (allowed {allowed}: this check's "
        "read, the listener's quiet-time SELECT 1, the badge's shared read every 2 s)"
    )
    return [
        Row(
            "unchanged-tick cpu/request",
            "us",
            cpu["ours"],
            cpu["baseline"],
            Target("ratio<=", 0.6),
            note=note,
        )
    ]
