"""search: the ticket list filtered by `q` on the big team, through our stack vs the bare SQL.

Ours: GraphQL `tickets(teamId, filter: {q}, first: 50)` with `totalCount`, posted one at a time
to the web app (its own uvicorn process) as the big team's admin. Baseline: the same two
statements `desk.helpdesk.tickets.list_tickets` runs (the count, capped at `COUNT_CAP`, and the first
page), with the same parameters, one after the other on a plain psycopg connection. A fixed list of words of varied selectivity; p50 over
all requests of a run.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import psycopg

from bench import env
from bench.harness import Ctx, alternate
from bench.stats import Row, Target, percentile
from bench.web import OURS, serve, session_cookie
from desk.helpdesk.filters import parse_filter
from desk.helpdesk.tickets import list_sql

WORDS = ("invoice", "dark mode", "Wonka", "spam", "退款", "Singapore", "locked", "order #42")
REPEAT = {True: 2, False: 3}
QUERY = (
    "query Search($team: ID!, $q: String) { tickets(teamId: $team, filter: {q: $q}, first: 50) "
    "{ totalCount totalCountIsExact edges { node { id title status priority createdAt } } } }"
)


def bare_sql(team: int, user: int, q: str) -> tuple[str, str, dict[str, object]]:
    """(count SQL, page SQL, params) exactly as list_tickets builds them for staff."""
    return list_sql(parse_filter({"q": q}), team_id=team, user_id=user, staff=True, first=50)


async def _bare(url: str, team: int, user: int, repeat: int) -> list[float]:
    ms = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(repeat):
            for word in WORDS:
                count, page, params = bare_sql(team, user, word)
                began = time.perf_counter()
                await (await conn.execute(count, params)).fetchone()
                await (await conn.execute(page, params)).fetchall()
                ms.append((time.perf_counter() - began) * 1000)
    return ms


def _ours(url: str, cookie: str, team: int, repeat: int) -> list[float]:
    ms = []
    with httpx.Client(timeout=30, headers={"Cookie": cookie}) as client:
        for _ in range(repeat):
            for word in WORDS:
                body = {"query": QUERY, "variables": {"team": str(team), "q": word}}
                began = time.perf_counter()
                r = client.post(url, json=body)
                ms.append((time.perf_counter() - began) * 1000)
                if r.status_code != 200 or "errors" in r.json():
                    raise RuntimeError(f"search for {word!r} failed: {r.text[:300]}")
    return ms


async def search(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    settings = ctx.settings("search")
    cookie = session_cookie(settings, p.zhou)
    repeat = REPEAT[ctx.quick]
    web_env = env.worker_env(settings)
    with serve(OURS, web_env, ctx.log("web-search.log"), ctx.profile_to("web-search")) as web:
        url = web.url + "/graphql"
        await asyncio.to_thread(_ours, url, cookie, p.big_team, 1)  # warm-up
        await _bare(ctx.db_url, p.big_team, p.zhou, 1)

        async def ours(_: int) -> float:
            return percentile(await asyncio.to_thread(_ours, url, cookie, p.big_team, repeat), 50)

        async def base(_: int) -> float:
            return percentile(await _bare(ctx.db_url, p.big_team, p.zhou, repeat), 50)

        a, b = await alternate(ctx.sizes.runs, ours, base)
    return [
        Row(
            "search p50",
            "ms",
            a,
            b,
            Target("value<=", 60),
            note=f"{ctx.sizes.big:,} tickets; words {', '.join(WORDS)}; count + first page of 50",
        )
    ]
