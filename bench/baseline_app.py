"""The status-read baseline: a minimal FastAPI app reading one task row with a psycopg pool.

    uvicorn bench.baseline_app:create_app --factory   (DATABASE_URL from the environment)

`GET /task/{id}` returns the row's status fields as JSON — no session, no membership check, no
GraphQL, no templates: what "reading the same row" costs with nothing of ours around it. The pool
has as many connections as the web app's engine (DB_POOL_SIZE + DB_MAX_OVERFLOW).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from desk.settings import load_settings

SQL = (
    "SELECT id, kind, status, progress, progress_message, result_summary, finished_at "
    "FROM background_task WHERE id = %s"
)


def create_app() -> FastAPI:
    settings = load_settings()
    size = settings.db_pool_size + settings.db_max_overflow

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pool = AsyncConnectionPool(settings.libpq_url, min_size=size, max_size=size, open=False)
        await pool.open(wait=True)
        app.state.pool = pool
        try:
            yield
        finally:
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

    return app
