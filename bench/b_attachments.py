"""attachment-20mb: a 20 MB file (random bytes: nothing compresses it) up and down through the
web process (docs/architecture.md, "Conversation"; docs/rest.md).

Ours: a fresh web app in its own uvicorn process each run, warmed up by one 1 MB file up and
down; its VmRSS then, its VmHWM reset (/proc/PID/clear_refs); the staff member's API token
(`Authorization: Bearer`) posts a reply with the file (`POST /api/v1/tickets/{id}/messages`,
multipart `files`) and reads it back (`GET /attachments/{id}`, streamed, every byte checked).
Figures: RSS growth (VmHWM after both - VmRSS before; after the upload alone in the note) and
MB/s each way (the request's start to the last byte of its answer). Baseline, the same run:
PostgreSQL's own large value — an INSERT of the same 20 MB as one bytea (a binary parameter)
into a scratch table and its SELECT (binary), on a plain psycopg connection. MB = 2**20 bytes.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from typing import Any

import httpx
import psycopg

from bench import env, procs
from bench.harness import Ctx, alternate, runtime
from bench.stats import Row, Target
from bench.web import OURS, serve
from desk.people import users
from desk.work import opening

MB = 1024 * 1024
SIZE = 20 * MB
WARM = 1 * MB


def _up(client: httpx.Client, ticket: int, data: bytes) -> tuple[float, int]:
    """(seconds, attachment id) of one reply carrying `data`."""
    files = {"files": ("blob.bin", data, "application/octet-stream")}
    began = time.perf_counter()
    r = client.post(f"/api/v1/tickets/{ticket}/messages", data={"body": "The log."}, files=files)
    took = time.perf_counter() - began
    if r.status_code != 201:
        raise RuntimeError(f"upload: {r.status_code} {r.text[:300]}")
    (sent,) = r.json()["message"]["attachments"]
    if sent["size"] != len(data):
        raise RuntimeError(f"stored {sent['size']} of {len(data)} bytes")
    return took, int(sent["attachment_id"])


def _down(client: httpx.Client, attachment: int, data: bytes) -> float:
    got = bytearray()
    began = time.perf_counter()
    with client.stream("GET", f"/attachments/{attachment}") as r:
        if r.status_code != 200:
            raise RuntimeError(f"download: {r.status_code}")
        for chunk in r.iter_raw():
            got += chunk
    took = time.perf_counter() - began
    if got != data:
        raise RuntimeError(f"read back {len(got)} bytes, not the {len(data)} sent")
    return took


def _one_process(ctx: Ctx, wenv: dict[str, str], token: str, ticket: int, i: int) -> dict[str, Any]:
    """One fresh web process: the warm-up, then the 20 MB file up and down."""
    data, warm = os.urandom(SIZE), os.urandom(WARM)
    headers = {"Authorization": f"Bearer {token}"}
    log, prof = ctx.log(f"web-attach{i}.log"), ctx.profile_to(f"web-attach{i}")
    with (
        serve(OURS, wenv, log, prof) as web,
        httpx.Client(base_url=web.url, timeout=120, headers=headers) as client,
    ):
        _down(client, _up(client, ticket, warm)[1], warm)  # code paths, pools, buffers
        time.sleep(1.0)
        before = procs.proc_status(web.pid)["VmRSS"]
        if not procs.reset_peak_rss(web.pid):
            raise RuntimeError("cannot reset the web process's VmHWM (/proc/PID/clear_refs)")
        up, attachment = _up(client, ticket, data)
        hwm_up = procs.proc_status(web.pid)["VmHWM"]
        down = _down(client, attachment, data)
        hwm = procs.proc_status(web.pid)["VmHWM"]
    return {"before": before / 1024, "growth": (hwm - before) / 1024,
            "growth_up": (hwm_up - before) / 1024, "up": SIZE / MB / up,
            "down": SIZE / MB / down}  # fmt: skip


async def _pg(url: str, table: str) -> tuple[float, float, float]:
    """PostgreSQL's own: MB/s writing the value, reading it back (binary, then text)."""
    data = os.urandom(SIZE)
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("SELECT 1")
        began = time.perf_counter()
        await conn.execute(f"INSERT INTO {table} (data) VALUES (%b)", (data,))
        wrote = time.perf_counter() - began
        took = []
        for binary in (True, False):  # the figure; how a text-format read (hex) compares
            cur = conn.cursor(binary=binary)
            began = time.perf_counter()
            await cur.execute(f"SELECT data FROM {table}")
            row = await cur.fetchone()
            took.append(time.perf_counter() - began)
            if row is None or bytes(row[0]) != data:
                raise RuntimeError("PostgreSQL read back other bytes")
        await conn.execute(f"TRUNCATE {table}")
    return SIZE / MB / wrote, SIZE / MB / took[0], SIZE / MB / took[1]


async def attachment_20mb(ctx: Ctx) -> list[Row]:
    p = ctx.people
    assert p is not None
    settings = ctx.settings("attach")
    async with runtime(settings) as rt:
        opened = await opening.open_ticket(rt, p.lin, p.big_team, "Bench: a large file", "Logs?")
        _, token = await users.create_token(rt, p.chen, "bench attachments")
    ticket = opened.ticket.id or 0
    wenv = env.worker_env(settings)
    table = f"bench_blob_{secrets.token_hex(3)}"
    ours_runs: list[dict[str, Any]] = []
    reads: list[float] = []
    text_reads: list[float] = []
    async with await psycopg.AsyncConnection.connect(ctx.db_url, autocommit=True) as conn:
        await conn.execute(f"CREATE TABLE {table} (data bytea NOT NULL)")
    try:
        await _pg(ctx.db_url, table)  # warm-up

        async def ours(i: int) -> float:
            ours_runs.append(await asyncio.to_thread(_one_process, ctx, wenv, token, ticket, i))
            return float(ours_runs[-1]["up"])

        async def base(_: int) -> float:
            wrote, read, text = await _pg(ctx.db_url, table)
            reads.append(read)
            text_reads.append(text)
            return wrote

        ups, writes = await alternate(ctx.sizes.long_runs, ours, base)
    finally:
        async with await psycopg.AsyncConnection.connect(ctx.db_url, autocommit=True) as conn:
            await conn.execute(f"DROP TABLE IF EXISTS {table}")

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in ours_runs]

    note = (
        f"{SIZE // MB} MB of random bytes, a fresh web process per run; peak RSS growth after "
        f"the upload alone {', '.join(f'{g:.1f}' for g in col('growth_up'))} MB; baseline "
        "INSERT / SELECT of one 20 MB bytea (psycopg, binary; the SELECT in text format: "
        f"{', '.join(f'{t:.0f}' for t in text_reads)} MB/s)"
    )
    return [
        Row("attachment-20mb rss", "MB", col("growth"), col("before"), Target("value<=", 16),
            note=note, extra={"runs": ours_runs}),
        Row("attachment-20mb up", "MB/s", ups, writes, Target("ratio>=", 0.7)),
        Row("attachment-20mb down", "MB/s", col("down"), reads, Target("ratio>=", 0.7)),
    ]  # fmt: skip
