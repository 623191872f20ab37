"""conversation-post, conversation-page, conversation-live: a ticket's conversation
(docs/architecture.md, "Conversation") in the big team, as its staff (chen) and customer (lin).

conversation-post: `desk.work.conversation.post_message`, a staff reply that sets the status
(PENDING and OPEN in turn: every post changes it): the message, the ticket's figures, the
history entry, the customer's EMAIL task and its `message_email` row in one commit, then the
task to arq. Floor: the same rows written bare, in one transaction, plain psycopg, on a ticket
of its own — the INSERTs of the four new rows (post_message's column lists, the task's filters
copied from a real post) and the UPDATE of the ticket's status and figures (the change the
history entry records; a status is indexed, so that UPDATE writes every index of the ticket,
the title's trigram and bigram GIN indexes included, and costs as much as two INSERTs). The
note also gives ours against the four INSERTs alone. Both run in this process with its garbage
collector set up as the web process's (desk/core/heap.py), since post_message is the web's code.

conversation-page: `GET /tickets/{id}` as staff (session cookie), the app in its own uvicorn
process, on a ticket of 1,000 messages (the opening one and 999 by SQL, every tenth staff
message a note). Floor: the SELECT of those 1,000 `ticket_message` rows, plain psycopg. The
note gives how many messages the page rendered (`<li class="post`, ui/templates/_thread.html).
The loads go down one kept-alive `http.client` connection, as a browser keeps its connection:
the floor's psycopg connection is open before it is timed, and httpx's own Python (~0.3-0.5 ms
a request over http.client's) is the client's cost, which the floor never pays; the server's
work — uvicorn, the session, the page's read and its rendering — is all still timed, to the
last byte of the body.

conversation-live: staff has the ticket page open, its live stream (`/tickets/{id}/live`,
ui/ticket_live.py) read as thread.js's EventSource would; the customer posts (`post_message`
here), GAP apart so the stream's debounce never holds a push. Latency: the post's start to
`changed` (so: the post, its commit, the feed's NOTIFY, the stream's SETTLE); in the note also
to the catch-up answer (`/tickets/{id}/thread?after=…`) that shows it. Floor: a bare
`pg_notify` → a plain psycopg LISTEN, in this process. Then the page's watcher tick (`/watch`,
bell and badge as ui.js builds them from the page) that finds nothing changed, 200 times on
the app in this process, every statement of its pool and engine counted (as
tests/ui/test_unchanged_tick.py counts them).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import http.client
import itertools
import json
import re
import secrets
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from bench import env
from bench.b_feed import CHECK_TICKS, Page
from bench.harness import Ctx, People, alternate, runtime
from bench.stats import Row, Target, percentile
from bench.web import OURS, serve, session_cookie
from desk.core import heap
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.work import conversation, opening
from tests.counting import counting

POSTS = {True: 30, False: 100}  # posts per run (conversation-post)
THREAD = 1_000  # messages of the conversation-page ticket
PAGE_GETS = {True: 8, False: 20}  # page loads per run
LIVE_POSTS = {True: 10, False: 30}  # posts per run (conversation-live)
GAP = 0.4  # s between live posts: more than the stream's DEBOUNCE (0.25 s)
DEADLINE = 10.0  # s for any one event
POST_RE = re.compile(r'<li class="post[ "]')
REPLY = "Thanks for the details. Could you try the driver from the downloads page and tell us?"

# The floor's rows, with the column lists post_message writes (desk/helpdesk/thread.py,
# desk/ledger/mail.py, desk/work/conversation.py).
F_MESSAGE = (
    "INSERT INTO ticket_message (ticket_id, team_id, author_id, internal, body, created_at) "
    "VALUES (%s, %s, %s, false, %s, %s) RETURNING id"
)
F_HISTORY = (
    "INSERT INTO ticket_history (ticket_id, team_id, actor_id, at, field, old_value, new_value) "
    "VALUES (%s, %s, %s, %s, 'status', %s, %s)"
)
F_TASK = (
    "INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters, run_at, "
    "max_attempts, sends, created_at, updated_at) "
    "VALUES ('EMAIL', %s, %s, %s, %s, %s::jsonb, %s, 8, 0, %s, %s) RETURNING id"
)
F_EMAIL = "INSERT INTO message_email (message_id, task_id, recipient_id) VALUES (%s, %s, %s)"
F_TICKET = (
    "UPDATE ticket SET status = %s, message_count = message_count + 1, last_public_reply_at = %s, "
    "first_response_at = coalesce(first_response_at, %s), updated_at = %s WHERE id = %s"
)
BULK = """
WITH added AS (
 INSERT INTO ticket_message (ticket_id, team_id, author_id, internal, body, created_at)
 SELECT %(t)s, %(team)s, CASE WHEN i %% 2 = 0 THEN %(staff)s ELSE %(customer)s END, i %% 10 = 0,
  'Message ' || i || E'.\\n' || repeat('The printer on floor 3 still shows error 42. ', 8),
  now() + i * interval '1 millisecond'
 FROM generate_series(1, %(n)s) i RETURNING internal)
UPDATE ticket SET message_count = message_count + (SELECT count(*) FROM added WHERE NOT internal),
 first_response_at = now(), last_public_reply_at = now(), updated_at = now() WHERE id = %(t)s
"""
THREAD_READ = (
    "SELECT id, ticket_id, team_id, author_id, internal, body, attachment_count, created_at, "
    "redacted_at, redacted_by FROM ticket_message WHERE ticket_id = %s ORDER BY id"
)


async def new_ticket(rt: Runtime, ctx: Ctx, title: str) -> int:
    """A ticket the big team's customer opens (one opening message)."""
    p = ctx.people
    assert p is not None
    opened = await opening.open_ticket(rt, p.lin, p.big_team, title, "Error 42 since Monday.")
    return opened.ticket.id or 0


def _ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000


# --- conversation-post ------------------------------------------------------------------------


async def _timed(n: int, step: Callable[[], Awaitable[object]]) -> list[float]:
    """ms of each of n steps, one after the other."""
    ms = []
    for _ in range(n):
        began = time.perf_counter()
        await step()
        ms.append(_ms(began))
    return ms


def _p50_p99(runs: list[list[float]]) -> tuple[list[float], list[float]]:
    return [percentile(r, 50) for r in runs], [percentile(r, 99) for r in runs]


async def _bare_post(
    conn: psycopg.AsyncConnection[Any],
    ticket: int,
    p: People,
    filters: str,
    old_new: Iterator[Any],
    update: bool,
) -> None:
    """The floor: the rows of a reply that sets the status, bare, in one transaction (with
    `update`, the ticket's UPDATE too)."""
    now, (old, new), scope = datetime.now(UTC), next(old_new), f"email:{secrets.token_hex(12)}"
    async with conn.transaction():
        m = await (
            await conn.execute(F_MESSAGE, (ticket, p.big_team, p.chen, REPLY, now))
        ).fetchone()
        if update:
            await conn.execute(F_TICKET, (new, now, now, now, ticket))
        await conn.execute(F_HISTORY, (ticket, p.big_team, p.chen, now, old, new))
        args = (p.big_team, p.lin, ticket, scope, filters, now, now, now)
        t = await (await conn.execute(F_TASK, args)).fetchone()
        assert m is not None and t is not None
        await conn.execute(F_EMAIL, (m[0], t[0], p.lin))


@contextmanager
def _as_web_process() -> Iterator[None]:
    """This process's collector set up as the web process's is (desk/core/heap.py), for as long
    as it runs post_message as the web would; then back as it was."""
    was = gc.get_threshold()
    heap.space_passes()
    heap.freeze_startup()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*was)


async def post(ctx: Ctx) -> list[Row]:
    with _as_web_process():
        return await _post_rows(ctx)


async def _post_rows(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    n = POSTS[ctx.quick]
    statuses = itertools.cycle(("PENDING", "OPEN"))  # each post changes the status
    runs: dict[str, list[list[float]]] = {"ours": [], "floor": [], "inserts": []}
    async with runtime(ctx.settings("conv-post")) as rt:
        ours_ticket = await new_ticket(rt, ctx, "Bench: replies")

        def reply() -> Awaitable[object]:
            return conversation.post_message(
                rt, p.chen, ours_ticket, REPLY, set_status=next(statuses)
            )

        with counting(rt.pg) as pg_seen, _every_statement(rt.engine) as orm_seen:
            first = await reply()  # warm-up, its statements counted
        statements = len([s for s in pg_seen if s != "checkout"]) + len(orm_seen)
        if len(first.changes) != 1 or len(first.email_task_ids) != 1:
            raise RuntimeError(f"a reply wrote {first.changes} and {first.email_task_ids}")
        async with rt.engine.connect() as c:
            sql = sa.text("SELECT filters FROM background_task WHERE id = :t")
            found = await c.execute(sql, {"t": first.email_task_ids[0]})
            filters = json.dumps(found.scalar_one(), ensure_ascii=False)
        steps: dict[str, Callable[[], Awaitable[object]]] = {"ours": reply}
        async with await psycopg.AsyncConnection.connect(ctx.db_url) as conn:
            for name, update in (("floor", True), ("inserts", False)):
                ticket = await new_ticket(rt, ctx, f"Bench: bare writes ({name})")
                old_new = itertools.cycle((("OPEN", "PENDING"), ("PENDING", "OPEN")))
                steps[name] = functools.partial(
                    _bare_post, conn, ticket, p, filters, old_new, update
                )
                await steps[name]()  # warm-up: the connection's plans and caches
            for i in range(ctx.sizes.runs):  # in turn, the order reversed every other run
                for name in list(steps)[:: 1 if i % 2 == 0 else -1]:
                    runs[name].append(await _timed(n, steps[name]))
    (a50, a99), (b50, b99) = _p50_p99(runs["ours"]), _p50_p99(runs["floor"])
    c99 = statistics.median(_p50_p99(runs["inserts"])[1])
    note = (
        f"{n} posts per run; a staff reply that sets the status: message + ticket UPDATE + history "
        f"+ EMAIL task + message_email in one commit, then the task to arq ({statements} "
        "statements, pipelined); floor: the same rows bare, the 4 INSERTs and the ticket's "
        f"UPDATE in one transaction; against the 4 INSERTs alone (p99 {c99:.2f} ms) ours is "
        f"{statistics.median(a99) / c99:.2f}x"
    )
    return [
        Row("conversation-post p50", "ms", a50, b50, note=note),
        Row("conversation-post p99", "ms", a99, b99, Target("ratio<=", 1.3),
            extra={"inserts_p99_ms": c99}),
    ]  # fmt: skip


# --- conversation-page ------------------------------------------------------------------------


def _pages(base: str, cookie: str, ticket: int, n: int) -> tuple[list[float], int, int]:
    """n page loads on one kept-alive connection: (ms each, messages rendered, bytes of the
    page). http.client, not httpx: see the module's docstring (conversation-page)."""
    ms, shown, size = [], 0, 0
    host, _, port = base.removeprefix("http://").partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Cookie": cookie, "Accept-Encoding": "identity"}
    try:
        for _ in range(n):
            began = time.perf_counter()
            conn.request("GET", f"/tickets/{ticket}", headers=headers)
            r = conn.getresponse()
            body = r.read()
            ms.append(_ms(began))
            text = body.decode("utf-8")
            if r.status != 200:
                raise RuntimeError(f"ticket page: {r.status} {text[:300]}")
            shown, size = len(POST_RE.findall(text)), len(body)
    finally:
        conn.close()
    return ms, shown, size


async def _reads(url: str, ticket: int, n: int) -> list[float]:
    ms = []
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(n):
            began = time.perf_counter()
            rows = await (await conn.execute(THREAD_READ, (ticket,))).fetchall()
            ms.append(_ms(began))
            if len(rows) != THREAD:
                raise RuntimeError(f"the ticket has {len(rows)} messages, not {THREAD}")
    return ms


async def page(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    settings = ctx.settings("conv-page")
    n = PAGE_GETS[ctx.quick]
    async with runtime(settings) as rt:
        ticket = await new_ticket(rt, ctx, "Bench: a long conversation")
    async with await psycopg.AsyncConnection.connect(ctx.db_url, autocommit=True) as conn:
        args = {"t": ticket, "team": p.big_team, "staff": p.chen, "customer": p.lin}
        await conn.execute(BULK, args | {"n": THREAD - 1})  # THREAD messages in all
    cookie = session_cookie(settings, p.chen)
    seen = {"shown": 0, "bytes": 0}
    web_env = env.worker_env(settings)
    with serve(OURS, web_env, ctx.log("web-conv-page.log"), ctx.profile_to("web-conv-page")) as web:
        await asyncio.to_thread(_pages, web.url, cookie, ticket, 2)  # warm-up
        await _reads(ctx.db_url, ticket, 2)

        async def ours(_: int) -> float:
            ms, seen["shown"], seen["bytes"] = await asyncio.to_thread(
                _pages, web.url, cookie, ticket, n
            )
            return percentile(ms, 50)

        async def base(_: int) -> float:
            return percentile(await _reads(ctx.db_url, ticket, n), 50)

        a, b = await alternate(ctx.sizes.runs, ours, base)
    note = (
        f"{n} loads per run as staff; the page rendered {seen['shown']} of {THREAD:,} messages "
        f"({seen['bytes']:,} B); floor: SELECT of the {THREAD:,} ticket_message rows"
    )
    return [
        Row("conversation-page p50", "ms", a, b, Target("ratio<=", 1.2), note=note,
            extra={"rendered": seen["shown"], "page_bytes": seen["bytes"]}),
    ]  # fmt: skip


# --- conversation-live ------------------------------------------------------------------------


@asynccontextmanager
async def _stream(base: str, cookie: str, ticket: int) -> AsyncIterator[asyncio.Queue[str]]:
    """The page's live stream, read as an EventSource would: each event's name as it comes."""
    events: asyncio.Queue[str] = asyncio.Queue()
    timeout = httpx.Timeout(30, read=None)  # a quiet stream is not an ended one
    async with (
        httpx.AsyncClient(base_url=base, timeout=timeout, headers={"Cookie": cookie}) as c,
        c.stream("GET", f"/tickets/{ticket}/live", headers={"Accept": "text/event-stream"}) as r,
    ):
        if r.status_code != 200:
            raise RuntimeError(f"live stream: {r.status_code}")

        async def read() -> None:
            name = ""
            async for line in r.aiter_lines():
                if line.startswith("event:"):
                    name = line.removeprefix("event:").strip()
                elif not line and name:
                    events.put_nowait(name)
                    name = ""

        reading = asyncio.create_task(read())
        try:
            if await asyncio.wait_for(events.get(), DEADLINE) != "ready":
                raise RuntimeError("the live stream did not start with `ready`")
            yield events
        finally:
            reading.cancel()


@contextmanager
def _every_statement(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every statement `engine` sends while inside (the session's lookup included)."""
    seen: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    sa.event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        sa.event.remove(engine.sync_engine, "before_cursor_execute", count)


async def _unchanged_polls(
    settings: Settings, cookie: str, ticket: int
) -> tuple[list[str], int, str]:
    """The ticket page's watcher tick (ui.js `watchUrl` from the page: bell, badge) on the app
    in this process, ticked until it answers 204; then CHECK_TICKS more, every statement of its
    pool and engine counted (as tests/ui/test_unchanged_tick.py does): (statements, pool
    checkouts, the URL)."""
    from api.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        rt = app.state.runtime
        transport = httpx.ASGITransport(app=app)
        headers = {"Cookie": cookie, "HX-Request": "true"}
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            r = await c.get(f"/tickets/{ticket}", headers={"Cookie": cookie})
            assert r.status_code == 200, (r.status_code, r.text[:300])
            found = Page()
            found.feed(r.text)
            assert found.bell is not None and found.health is not None, "no bell or badge"
            for _ in range(10):  # the first ticks read and teach the memory
                if (r := await c.get(url := found.url(None), headers=headers)).status_code == 204:
                    break
                found.feed(r.text)
                await asyncio.sleep(0.2)
            assert r.status_code == 204, (r.status_code, r.text[:300])
            with counting(rt.pg) as pg_seen, _every_statement(rt.engine) as orm_seen:
                for _ in range(CHECK_TICKS):
                    r = await c.get(url, headers=headers)
                    assert r.status_code == 204, (r.status_code, r.text[:300])
    ran = [s for s in pg_seen if s != "checkout"] + orm_seen
    return ran, pg_seen.count("checkout"), url


async def _notify_floor(url: str, n: int) -> list[float]:
    """n bare pg_notify → LISTEN round trips on a channel of this run's own."""
    channel = f"bench_conv_{secrets.token_hex(4)}"
    ms: list[float] = []
    async with (
        await psycopg.AsyncConnection.connect(url, autocommit=True) as listener,
        await psycopg.AsyncConnection.connect(url, autocommit=True) as sender,
    ):
        await listener.execute(f"LISTEN {channel}")
        for i in range(n):
            await asyncio.sleep(0.05)
            began = time.perf_counter()
            await sender.execute("SELECT pg_notify(%s, %s)", (channel, str(i)))
            async for note in listener.notifies(timeout=DEADLINE):
                if note.payload == str(i):
                    ms.append(_ms(began))
                    break
            else:
                raise RuntimeError(f"notice {i} on {channel} never came")
    return ms


async def live(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    settings = ctx.settings("conv-live")
    n = LIVE_POSTS[ctx.quick]
    shown: list[float] = []
    after_commit: list[float] = []
    async with runtime(settings) as rt:
        ticket = await new_ticket(rt, ctx, "Bench: the agent's open page")
        cookie = session_cookie(settings, p.chen)
        web_env = env.worker_env(settings)
        log, prof = ctx.log("web-conv-live.log"), ctx.profile_to("web-conv-live")
        with serve(OURS, web_env, log, prof) as web:
            last = 0
            async with (
                _stream(web.url, cookie, ticket) as events,
                httpx.AsyncClient(base_url=web.url, timeout=30, headers={"Cookie": cookie}) as c,
            ):

                async def one(i: int) -> float:
                    nonlocal last
                    await asyncio.sleep(GAP)
                    while not events.empty():  # what came since (an e-mail task's notice)
                        events.get_nowait()
                    began = time.perf_counter()
                    posted = await conversation.post_message(rt, p.lin, ticket, f"Still {i}.")
                    committed = time.perf_counter()
                    while (name := await asyncio.wait_for(events.get(), DEADLINE)) != "changed":
                        assert name == "ready", name  # a reconnect would say ready again
                    took = _ms(began)
                    after_commit.append(_ms(committed))
                    r = await c.get(f"/tickets/{ticket}/thread?after={last}&h=0&at=0",
                                    headers={"HX-Request": "true"})  # fmt: skip
                    if f'id="msg-{posted.message.id}"' not in r.text:
                        raise RuntimeError(f"the catch-up lacks message {posted.message.id}")
                    shown.append(_ms(began))
                    last = posted.message.id
                    return took

                await one(-1)  # warm-up: the feed, the stream, the catch-up route
                shown.clear()
                after_commit.clear()
                runs: dict[str, list[list[float]]] = {"ours": [], "floor": []}

                async def ours(_: int) -> float:
                    runs["ours"].append([await one(i) for i in range(n)])
                    return 0.0

                async def floor(_: int) -> float:
                    runs["floor"].append(await _notify_floor(ctx.db_url, n))
                    return 0.0

                await alternate(ctx.sizes.runs, ours, floor)
        statements, checkouts, url = await _unchanged_polls(settings, cookie, ticket)
    (a50, a99), (b50, b99) = _p50_p99(runs["ours"]), _p50_p99(runs["floor"])
    note = (
        f"{n} customer posts per run, {GAP:g} s apart, staff page open: post start → `changed` "
        f"on /tickets/{{id}}/live (from the post's return: p50 {percentile(after_commit, 50):.1f} "
        f"ms); → the catch-up answer showing it p50 {percentile(shown, 50):.1f}, p99 "
        f"{percentile(shown, 99):.1f} ms; floor: bare pg_notify → LISTEN"
    )
    polls = (
        f"{CHECK_TICKS} unchanged ticks of the ticket page's watcher ({url.partition('?')[2]}), "
        f"in-process: {len(statements)} statements, {checkouts} pool checkouts"
        + (f" ({'; '.join(sorted({s[:60] for s in statements}))})" if statements else "")
    )
    return [
        Row("conversation-live p50", "ms", a50, b50, note=note,
            extra={"shown_ms": shown, "after_commit_ms": after_commit}),
        Row("conversation-live p99", "ms", a99, b99, Target("value<=", 1000)),
        Row("conversation-live unchanged polls", "statements", [len(statements)],
            target=Target("value<=", 0), note=polls, extra={"statements": statements}),
    ]  # fmt: skip
