"""subscription-latency and idle-subscriptions: GraphQL subscriptions (`taskUpdated(id)` over
graphql-transport-ws at `/graphql`) on one web process, pushed by its change feed
(docs/architecture.md, "Change feed").

subscription-latency: 200 subscribers - 200 WebSockets from 2 client processes
(bench/feed_client.py), each signed in by the session cookie of its task's owner (20 staff of a
team of their own, 10 queued exports each) - follow one task each. Then the bench writes, ROUNDS
times, `progress = round / 100, updated_at = clock_timestamp()` on all 200 tasks in waves of 20
rows (one UPDATE, its own commit, every 100 ms). Latency = the client's receive time minus the
row's committed `updated_at` (RETURNING gives it to the writer; the Task type has no
`updatedAt`, the event's `progress` says which write it shows; same machine, same clock), so it
includes the commit itself; the note gives the figures from the writer's clock after its COMMIT
returned too. The baseline is measured on the same writes at the same time: a plain psycopg
connection LISTENing to the feed's channel in a process of its own (the floor of any push).

idle-subscriptions: 1,000 open subscriptions (100 WebSockets x 10, SUBSCRIPTIONS_PER_CONNECTION's
default; 25 people x 4 sockets keeps each at 40, under SUBSCRIPTIONS_PER_PERSON's 50, so no
setting is raised), each following its own queued export. The web process's VmRSS growth from
before they open to the end of 30 s idle with them open, and its CPU over those 30 s; the
baseline: the same process idle, the same 30 s, before any opened (after one socket with one
subscription came and went, so first-use imports are not counted as growth).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench import env
from bench.b_feed import team_with_exports
from bench.harness import Ctx, runtime
from bench.procs import cpu_seconds, proc_status
from bench.stats import Row, Target, percentile
from bench.web import OURS, serve, session_cookie

QUERY = "subscription($id: ID!) { taskUpdated(id: $id) { id status progress } }"
LATENCY_PEOPLE, LATENCY_EACH = 20, 10  # 200 tasks, 200 subscribers
CLIENT_PROCESSES = 2
WAVE, WAVE_GAP = 20, 0.1  # rows per UPDATE; seconds between them
DRAIN = 3.0  # seconds after the last write for the last events to arrive
ROUNDS, QUICK_ROUNDS = 10, 4
IDLE_PEOPLE, IDLE_EACH, PER_SOCKET = 25, 40, 10  # 1,000 subscriptions on 100 sockets
IDLE_SECONDS, QUICK_IDLE_SECONDS = 30.0, 5.0
WRITE = (
    "UPDATE background_task SET progress = %s, updated_at = clock_timestamp() "
    "WHERE id = ANY(%s) RETURNING id, updated_at"
)


@asynccontextmanager
async def clients(ctx: Ctx, name: str, args: list[list[str]]) -> AsyncIterator[list[Any]]:
    """`python -m bench.feed_client ARGS` per entry, ready (subscribed / listening) when this
    yields; the list fills with their JSON once the block ends without error."""
    procs = []
    out: list[Any] = []
    try:
        for i, a in enumerate(args):
            procs.append(await _spawn(a, ctx.log(f"{name}-{i}.log")))
        for p in procs:
            assert p.stdout is not None
            line = await asyncio.wait_for(p.stdout.readline(), 180)
            if line.strip() != b"ready":
                raise RuntimeError(f"{name}: a client was not ready ({line!r}); see its log")
        yield out
        for p in procs:
            out.append(await _finish(p))
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()


async def _spawn(args: list[str], log: Path) -> asyncio.subprocess.Process:
    with log.open("ab") as err:
        pipe = asyncio.subprocess.PIPE
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.feed_client", *args,
            cwd=env.ROOT, stdin=pipe, stdout=pipe, stderr=err,
        )  # fmt: skip


async def _finish(p: asyncio.subprocess.Process) -> Any:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(b"stop\n")
    await p.stdin.drain()
    raw = await asyncio.wait_for(p.stdout.read(), 60)
    await asyncio.wait_for(p.wait(), 30)
    got = json.loads(raw.strip().splitlines()[-1])
    if got["errors"]:
        raise RuntimeError(f"client errors: {got['errors'][:3]}")
    return got


@contextmanager
def plans(ws_url: str, sockets: list[dict[str, Any]], processes: int) -> Iterator[list[str]]:
    """The sockets shared among `processes` plan files (they carry session cookies: removed
    afterwards); yields their paths."""
    with tempfile.TemporaryDirectory(prefix="bench-feed-") as folder:
        paths = []
        for i in range(processes):
            path = Path(folder) / f"plan-{i}.json"
            mine = sockets[i::processes]
            path.write_text(json.dumps({"url": ws_url, "query": QUERY, "sockets": mine}))
            paths.append(str(path))
        yield paths


@dataclass(frozen=True)
class Write:
    updated: float  # the row's committed `updated_at` (epoch seconds)
    returned: float  # the writer's clock when its COMMIT returned
    wave: int


async def _write(db_url: str, ids: list[int], rounds: int) -> dict[tuple[int, int], Write]:
    """The writes, in waves: (task, round) -> when it was written."""
    writes: dict[tuple[int, int], Write] = {}
    wave_no = 0
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for r in range(1, rounds + 1):
            for at in range(0, len(ids), WAVE):
                cur = await conn.execute(WRITE, (r / 100, ids[at : at + WAVE]))
                done = time.time()  # autocommit: the statement has committed
                for task, updated in await cur.fetchall():
                    writes[(task, r)] = Write(updated.timestamp(), done, wave_no)
                wave_no += 1
                await asyncio.sleep(WAVE_GAP)
    return writes


@dataclass
class Latencies:
    """ms from the row's committed `updated_at` (and from the COMMIT's return) to receipt."""

    ms: list[float] = field(default_factory=list)
    after_commit: list[float] = field(default_factory=list)
    by_wave: dict[int, list[float]] = field(default_factory=dict)

    def firsts(self) -> list[float]:
        """Each wave's first event: one event's latency, queued behind none of its wave."""
        return [min(v) for v in self.by_wave.values()]


def _latencies(
    results: list[Any], writes: dict[tuple[int, int], Write], progress: bool
) -> Latencies:
    """An event's round is its progress x 100 (subscribers) or its count for that task (the
    listener)."""
    out = Latencies()
    for got in results:
        for task, key, received in got["events"]:
            w = writes.get((task, round(key * 100) if progress else int(key)))
            if w is not None:
                out.ms.append((received - w.updated) * 1000)
                out.after_commit.append((received - w.returned) * 1000)
                out.by_wave.setdefault(w.wave, []).append(out.ms[-1])
    return out


def _sockets(
    owned: dict[int, list[int]], cookies: dict[int, str], per: int
) -> list[dict[str, Any]]:
    """Each person's tasks, `per` to a socket signed in as that person."""
    return [
        {"cookie": cookies[user], "tasks": ids[at : at + per]}
        for user, ids in owned.items()
        for at in range(0, len(ids), per)
    ]


async def latency(ctx: Ctx) -> list[Row]:
    settings = ctx.settings("feed-latency")
    rounds = QUICK_ROUNDS if ctx.quick else ROUNDS
    async with runtime(settings) as rt:
        _, owned = await team_with_exports(rt, "latency", LATENCY_PEOPLE, LATENCY_EACH)
    cookies = {u: session_cookie(settings, u) for u in owned}
    ids = [t for each in owned.values() for t in each]
    sockets = _sockets(owned, cookies, 1)
    log, profile = ctx.log("web-feed-latency.log"), ctx.profile_to("web-feed-latency")
    with serve(OURS, env.worker_env(settings), log, profile) as web:
        ws_url = web.url.replace("http://", "ws://") + "/graphql"
        with plans(ws_url, sockets, CLIENT_PROCESSES) as paths:
            args = [["subscribe", p] for p in paths] + [["listen", ctx.db_url]]
            async with clients(ctx, "feed-latency-client", args) as results:
                began = cpu_seconds(web.pid)
                writes = await _write(ctx.db_url, ids, rounds)
                await asyncio.sleep(DRAIN)
                cpu_ms = (cpu_seconds(web.pid) - began) * 1000 / max(1, len(writes))
    ours = _latencies(results[:-1], writes, progress=True)
    floor = _latencies(results[-1:], writes, progress=False)
    if len(ours.ms) < len(writes) or len(floor.ms) < len(writes):
        raise RuntimeError(f"{len(ours.ms)} events, {len(floor.ms)} notices of {len(writes)}")
    return _latency_rows(ours, floor, len(sockets), rounds, len(ids), cpu_ms)


def _latency_rows(
    ours: Latencies, floor: Latencies, sockets: int, rounds: int, tasks: int, cpu_ms: float
) -> list[Row]:
    def p(values: list[float], q: float) -> str:
        return f"{percentile(values, q):.1f}"

    note = (
        f"{sockets} WebSockets in {CLIENT_PROCESSES} processes, one taskUpdated each; {rounds} "
        f"rounds of {tasks} progress writes, UPDATEs of {WAVE} rows every {WAVE_GAP * 1000:.0f} "
        f"ms; {len(ours.ms)} events; from each row's committed updated_at (clock_timestamp()). "
        f"From the writer's clock after COMMIT returned instead: ours p50/p99 "
        f"{p(ours.after_commit, 50)}/{p(ours.after_commit, 99)} ms, floor "
        f"{p(floor.after_commit, 50)}/{p(floor.after_commit, 99)} ms. Each wave's first event "
        f"p50/p99 {p(ours.firsts(), 50)}/{p(ours.firsts(), 99)} ms (floor "
        f"{p(floor.firsts(), 50)}/{p(floor.firsts(), 99)}); web CPU per event {cpu_ms:.2f} ms"
    )
    return [
        Row(
            "subscription-latency p50",
            "ms",
            [percentile(ours.ms, 50)],
            [percentile(floor.ms, 50)],
            note=note,
        ),
        Row(
            "subscription-latency p99",
            "ms",
            [percentile(ours.ms, 99)],
            [percentile(floor.ms, 99)],
            Target("value<=", 50),
        ),
    ]


async def _idle_cpu(pid: int, seconds: float) -> float:
    """% of one core the process used over `seconds` of waiting."""
    began, at = cpu_seconds(pid), time.monotonic()
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - began) / (time.monotonic() - at) * 100


def _rss_mb(pid: int) -> float:
    return proc_status(pid)["VmRSS"] / 1024


async def idle(ctx: Ctx) -> list[Row]:
    settings = ctx.settings("feed-idle")
    seconds = QUICK_IDLE_SECONDS if ctx.quick else IDLE_SECONDS
    async with runtime(settings) as rt:
        _, owned = await team_with_exports(rt, "idle", IDLE_PEOPLE, IDLE_EACH)
    cookies = {u: session_cookie(settings, u) for u in owned}
    sockets = _sockets(owned, cookies, PER_SOCKET)
    log, profile = ctx.log("web-feed-idle.log"), ctx.profile_to("web-feed-idle")
    with serve(OURS, env.worker_env(settings), log, profile) as ours:
        ws_url = ours.url.replace("http://", "ws://") + "/graphql"
        warm = [{"cookie": sockets[0]["cookie"], "tasks": sockets[0]["tasks"][:1]}]
        with plans(ws_url, warm, 1) as paths:  # first use: imports, the protocol's handler
            async with clients(ctx, "feed-idle-warm", [["subscribe", p] for p in paths]):
                pass
        await asyncio.sleep(1)
        quiet = await _idle_cpu(ours.pid, seconds)
        before = _rss_mb(ours.pid)
        with plans(ws_url, sockets, CLIENT_PROCESSES) as paths:
            async with clients(ctx, "feed-idle-client", [["subscribe", p] for p in paths]) as got:
                opened = _rss_mb(ours.pid)
                busy = await _idle_cpu(ours.pid, seconds)
                after = _rss_mb(ours.pid)
    subscribed = sum(g["subscribed"] for g in got)
    if subscribed != len(sockets) * PER_SOCKET:
        raise RuntimeError(f"only {subscribed} subscriptions opened")
    note = (
        f"{subscribed} taskUpdated on {len(sockets)} WebSockets ({IDLE_PEOPLE} people); VmRSS "
        f"{before:.1f} MB before, {opened:.1f} MB once open, {after:.1f} MB after {seconds:g} s "
        f"idle; graphql-transport-ws pings answered by the clients: {sum(g['pings'] for g in got)}"
    )
    return [
        Row(
            "idle-subscriptions rss",
            "MB",
            [after - before],
            [before],
            Target("value<=", 100),
            note=note,
        ),
        Row("idle-subscriptions cpu", "% core", [busy], [quiet], Target("value<=", 2)),
    ]
