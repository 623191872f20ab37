"""Through PgBouncer in transaction mode (a real `pgbouncer` process): the web app's pools, a
real worker's export (COPY, build slots, chunk writes) and the change feed's direct listener,
with no session state on pooled connections (docs/architecture.md, "Connections")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import psycopg
import pytest

from api.app import create_app
from desk.core.pg import Pg
from desk.core.runtime import Runtime
from desk.core.settings import Settings, load_settings
from desk.people import users
from desk.work import tasks
from tests.helpers import running_workers, wait_for
from tests.pgbouncer import pgbouncer


@pytest.fixture
def pooled(settings: Settings) -> Iterator[Settings]:
    with pgbouncer(settings.libpq_url) as url:
        yield load_settings(
            taskdesk_env="test",
            database_url=url,
            direct_database_url=settings.database_url,
            db_pooler="transaction",
            redis_url=settings.redis_url,
            queue_prefix=settings.queue_prefix,
            secret_key=settings.secret_key,
        )


async def test_a_session_option_is_refused_by_the_pooler_and_the_pooled_setup_sends_none(
    pooled: Settings,
):
    unpooled = load_settings(**{**_fields(pooled), "db_pooler": "none"})
    refused = Pg(unpooled, statement_timeout_ms=5000)
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        await psycopg.AsyncConnection.connect(
            unpooled.libpq_url, options="-c statement_timeout=5000"
        )
    await refused.close()
    pg = Pg(pooled, statement_timeout_ms=5000, application_name="taskdesk-web")
    await pg.open()
    try:
        # The same statement many times: a prepared one would be looked for on a server
        # connection that never saw it.
        for i in range(12):
            row = await pg.one(
                "SELECT %(n)s::int AS n, current_setting('application_name') AS a", {"n": i}
            )
            assert row == {"n": i, "a": "taskdesk-web"}
    finally:
        await pg.close()


def _fields(s: Settings) -> dict[str, object]:
    keep = ("taskdesk_env", "database_url", "direct_database_url", "redis_url", "queue_prefix")
    return {k: getattr(s, k) for k in keep} | {"secret_key": s.secret_key}


def _through(settings: Settings, url: str, **over: object) -> Settings:
    """`settings` through the pooler at `url` in transaction mode (the direct URL for LISTEN)."""
    direct = {"database_url": url, "direct_database_url": settings.database_url}
    return load_settings(**_fields(settings) | direct, db_pooler="transaction", **over)


@pytest.fixture
async def client(pooled: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(pooled)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c,
    ):
        c.rt = app.state.runtime
        yield c


async def test_an_export_runs_through_the_pooler_with_a_real_worker(
    client, pooled: Settings, world, tmp_path
):
    rt = client.rt
    assert await rt.feed.sync(), "the change feed's listener reaches PostgreSQL directly"
    _, token = await users.create_token(rt, world.staff, "pooled")
    me = {"Authorization": f"Bearer {token}"}
    started = await client.post("/api/v1/exports", headers=me, json={"team_id": world.team})
    assert started.status_code == 202, started.text
    task_id = started.json()["task_id"]
    overrides = {"db_pooler": "transaction", "direct_database_url": pooled.direct_database_url}
    with running_workers(pooled, tmp_path, **overrides) as [worker]:

        async def finished() -> dict | None:
            got = (await client.get(f"/api/v1/tasks/{task_id}", headers=me)).json()
            return got if got["status"] in ("succeeded", "failed") else None

        done = await wait_for(finished, timeout=60, what=f"export {task_id} to finish")
        assert done["status"] == "succeeded", (done, worker.log())
    csv = await client.get(done["download_url"], headers=me)
    assert csv.status_code == 200 and b"Cannot log in" in csv.content
    claimed = await rt.pg.one(
        "SELECT worker_id FROM task_event WHERE task_id = %(t)s AND event = 'claimed'",
        {"t": task_id},
    )
    assert claimed is not None and claimed["worker_id"], "the event log names the worker"
    assert str(worker.pid) in claimed["worker_id"]


async def test_accepts_through_the_pooler_leave_no_session_state(settings: Settings, world):
    """The one-round-trip accept (desk/ledger/intake.py) keeps no prepared statement through a
    pooler: the next transaction may run on a server connection that has never seen it (the
    many-host drill through PgBouncer lost accepts so). One server connection here, so what
    the accepts left on it can be seen."""
    with pgbouncer(settings.libpq_url, pool_size=1) as url:
        narrow = _through(
            settings, url, db_pool_size=8, export_max_active_per_user=1000, export_max_per_hour=1000
        )
        rt = await Runtime.open(narrow)
        try:
            people = [world.admin, world.staff, world.customer, world.customer2]

            async def accepts(who: int, k: int) -> list[int]:
                made = []
                for i in range(10):
                    filters = {"q": f"{who}-{k}-{i}"}
                    made.append((await tasks.create_export(rt, who, world.team, filters)).id)
                return made

            made = await asyncio.gather(*(accepts(who, k) for who in people for k in range(2)))
            left = await rt.pg.all("SELECT name FROM pg_prepared_statements")
        finally:
            await rt.close()
    ids = [i for batch in made for i in batch]
    assert len(ids) == len(set(ids)) == 80
    assert left == [], "a prepared statement stays on the server connection"


async def test_pipelined_posts_through_the_pooler(settings: Settings, world):
    """A post runs pipelined (`Pg.transaction`: BEGIN with the read, the writes and the commit
    together); through a transaction pooler each post is whole, its e-mail reserved, and no
    prepared statement is left on the server connection."""
    from desk.work import conversation

    with pgbouncer(settings.libpq_url, pool_size=1) as url:
        narrow = _through(settings, url, db_pool_size=4)
        rt = await Runtime.open(narrow)
        try:
            ticket = world.tickets["login"]

            async def replies(k: int) -> list[conversation.Posted]:
                return [
                    await conversation.post_message(rt, world.staff, ticket, f"reply {k}-{i}")
                    for i in range(6)
                ]

            posted = [p for batch in await asyncio.gather(*map(replies, range(3))) for p in batch]
            left = await rt.pg.all("SELECT name FROM pg_prepared_statements")
            counts = await rt.pg.one(
                "SELECT count(*) AS messages FROM ticket_message WHERE ticket_id = %(t)s "
                " AND body LIKE 'reply %%'",
                {"t": ticket},
            )
        finally:
            await rt.close()
    assert len({p.message.id for p in posted}) == 18
    assert all(len(p.email_task_ids) == len(p.sends) == 1 for p in posted)
    assert counts is not None and counts["messages"] == 18
    assert left == [], "a prepared statement stays on the server connection"


async def test_the_ticket_page_read_through_the_pooler(settings: Settings, world):
    """The page's one statement (desk/reads/ticket_page.py) is neither prepared nor given a
    session setting through a transaction pooler: loads on one shared server connection leave
    no prepared statement and no plan setting behind."""
    from desk.reads import ticket_page

    with pgbouncer(settings.libpq_url, pool_size=1) as url:
        narrow = _through(settings, url, db_pool_size=4)
        rt = await Runtime.open(narrow)
        try:
            pages = await asyncio.gather(
                *(
                    ticket_page.read_page(rt.pg, world.staff, world.tickets["login"])
                    for _ in range(12)
                )
            )
            left = await rt.pg.all("SELECT name FROM pg_prepared_statements")
            mode = await rt.pg.one("SELECT current_setting('plan_cache_mode') AS m")
        finally:
            await rt.close()
    assert {p.view.ticket.id for p in pages} == {world.tickets["login"]}
    assert left == [] and mode == {"m": "auto"}
