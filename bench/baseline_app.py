"""The status-read baseline: a minimal FastAPI app reading one task row with a psycopg pool.

    uvicorn bench.baseline_app:create_app --factory   (DATABASE_URL from the environment)

`GET /task/{id}` returns the row's status fields as JSON — no session, no membership check, no
GraphQL, no templates: what "reading the same row" costs with nothing of ours around it. The pool
has as many connections as the web app's one pool (DB_POOL_SIZE).

`POST /graphql` is the trigger's floor (bench/b_http.py `trigger`): the same wrk script's
`createExport` body, answered with the minimum the contract asks of an export accept and nothing
else: the signed session cookie looked up, a transaction holding the person's lock (ours), the
person's active exports counted and the ledger row inserted (same table, columns and unique
index) in one statement, COMMIT, then the arq message in one Redis call (a queue no worker reads).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from arq.constants import job_key_prefix
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from redis.asyncio import Redis

from desk.core.settings import Settings, load_settings

SQL = (
    "SELECT id, kind, status, progress, progress_message, result_summary, finished_at "
    "FROM background_task WHERE id = %s"
)


SESSION = (
    "SELECT user_id FROM web_session WHERE id = %s AND revoked_at IS NULL AND expires_at > now()"
)
LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 7343))"
# The quota (active exports of the person) and membership in the insert's WHERE; a task active
# in the scope makes the unique index refuse (ON CONFLICT: no row).
ACCEPT = """
INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, max_attempts,
 dispatched_at, sends, created_at, updated_at)
SELECT 'EXPORT', %(team)s, %(owner)s, %(scope)s, %(filters)s::jsonb, now(), 5, now(), 1, now(),
 now()
WHERE EXISTS (SELECT 1 FROM membership WHERE user_id = %(owner)s AND team_id = %(team)s)
 AND (SELECT count(*) FROM background_task WHERE kind = 'EXPORT' AND team_id = %(team)s
  AND owner_id = %(owner)s AND status IN ('WAITING', 'RUNNING')) < %(max_active)s
ON CONFLICT (kind, team_id, scope_key) WHERE status IN ('WAITING', 'RUNNING') DO NOTHING
RETURNING id
"""
PAYLOAD = '{"t":null,"f":"process_task","a":[{"task_id":%d,"run":1}],"k":{},"et":%d}'


def _floor_answer(data: dict[str, Any]) -> Response:
    body = json.dumps({"data": {"createExport": data}}, separators=(",", ":"))
    return Response(body, media_type="application/json")


def add_trigger_floor(app: FastAPI, settings: Settings) -> None:
    """`POST /graphql`: the export accept's floor (see the module docstring)."""
    cookies = URLSafeTimedSerializer(settings.secret_key, salt="taskdesk-session")
    queue = f"{settings.queue_prefix}:floor:queue"  # no worker reads it

    @app.post("/graphql")
    async def accept(request: Request) -> Response:
        try:
            sid = cookies.loads(request.cookies.get("taskdesk_session", ""))["sid"]
            variables = (await request.json())["variables"]
            team, q = int(variables["team"]), str(variables.get("q") or "")
        except (BadSignature, KeyError, TypeError, ValueError) as exc:
            raise HTTPException(400) from exc
        digest = hashlib.sha256(sid.encode()).hexdigest()
        async with app.state.floor_pool.connection() as conn:
            found = await (await conn.execute(SESSION, (digest,))).fetchone()
            if found is None:
                raise HTTPException(401)
            owner = found[0]
            async with conn.transaction():
                await conn.execute(LOCK, (f"accept:{team}:{owner}",))
                params = {
                    "team": team, "owner": owner, "scope": f"export:{owner}:{q}",
                    "filters": json.dumps({"q": q}),
                    "max_active": settings.export_max_active_per_user,
                }  # fmt: skip
                row = await (await conn.execute(ACCEPT, params)).fetchone()
        if row is None:
            return _floor_answer({"__typename": "TaskConflict"})
        now_ms = int(time.time() * 1000)
        job = f"{settings.queue_prefix}:task:{row[0]}:1:1"
        async with app.state.redis.pipeline(transaction=True) as pipe:  # one round trip
            pipe.set(job_key_prefix + job, PAYLOAD % (row[0], now_ms), px=86_400_000)
            pipe.zadd(queue, {job: now_ms})
            await pipe.execute()
        return _floor_answer({"__typename": "Task", "id": str(row[0]), "status": "WAITING"})


def create_app() -> FastAPI:
    settings = load_settings()
    size = settings.db_pool_size

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = AsyncConnectionPool(settings.libpq_url, min_size=size, max_size=size, open=False)
        await pool.open(wait=True)
        app.state.pool = pool
        # The floor's own pool: autocommit (the session read is one round trip), as many
        # connections as ours takes its accepts from (`rt.pg`: DB_POOL_SIZE).
        floor = AsyncConnectionPool(
            settings.libpq_url, min_size=settings.db_pool_size,
            max_size=settings.db_pool_size, open=False, kwargs={"autocommit": True},
        )  # fmt: skip
        await floor.open(wait=True)
        app.state.floor_pool = floor
        app.state.redis = Redis.from_url(settings.redis_url)
        try:
            yield
        finally:
            await app.state.redis.aclose()
            await floor.close()
            await pool.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/task/{task_id}")
    async def task(task_id: int) -> dict[str, Any]:
        async with app.state.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            row = await (await cur.execute(SQL, (task_id,))).fetchone()
        if row is None:
            raise HTTPException(404)
        return dict(row)

    add_trigger_floor(app, settings)
    return app
