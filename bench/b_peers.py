"""pipeline-procrastinate and pipeline-pgqueuer: our pipeline against the two Python task queues
on PostgreSQL a user would pick instead, in the same run.

Ours is the `pipeline` / `start-latency` rows' side, called from bench/b_pipeline.py (`_ours`):
NOOP tasks accepted by `bench.submit noop`, one real `taskdesk worker`, times from the ledger.
The peer is procrastinate (bench/peers_procrastinate.py) or PgQueuer (bench/peers_pgqueuer.py),
each configured as its documentation says, its schema installed in the bench's run database by
its own installer, a no-op task, a submitter process and a worker process of its own:

- the same load: the same number of tasks from the same number of submitters (`bench.submit`'s
  `burst` / `paced`, one submission per call, a pool of max(submitters, 10) connections), and
  the same worker concurrency (WORKER_MAX_JOBS);
- throughput: tasks / s from the submitter's first submission to the last completion the peer
  recorded in PostgreSQL (procrastinate's `succeeded` event, PgQueuer's `successful` log row;
  ours: the last `finished_at`), polled from this process every 50 ms as `wait_tasks` polls ours;
- insert → start latency: at 50 submissions / s for RATE_SECONDS (as `start-latency`): ours is
  `started_at - created_at`, the peer's the task function's first line - the time taken just
  before its defer / enqueue call (both include the accept and its commit).

The peer worker starts (and is ready: it ran a probe task of its own) before each run and stops
after it; our worker stays up for the whole row, as in `pipeline`. The peers are bench-only
dependencies (pyproject's `bench` group): without them these rows error, naming the command.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import signal
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from bench import env, procs
from bench.b_pipeline import RATE, SUBMITTERS, Spent, _ours, spending
from bench.harness import Ctx, alternate, runtime, workers
from bench.profiling import recording
from bench.stats import Row, Target, percentile
from desk.core.runtime import Runtime

INSTALL = "uv sync --group bench"


class PeersMissing(RuntimeError):
    """A peer's package is not installed (they are bench-only dependencies)."""


@dataclass(frozen=True)
class Peer:
    name: str  # the row is pipeline-<name>
    module: str  # its processes: python -m <module> install|submit|work
    packages: tuple[str, ...]
    done_sql: str  # (count, last completion as epoch seconds) of the jobs with ids a..b
    setup: str  # how it is configured, for the row's note

    def require(self) -> None:
        missing = [p for p in self.packages if importlib.util.find_spec(p) is None]
        if missing:
            raise PeersMissing(
                f"{', '.join(missing)} not installed: the peers are bench-only dependencies, "
                f"install them with `{INSTALL}` (pyproject.toml's bench group)"
            )


PROCRASTINATE = Peer(
    "procrastinate",
    "bench.peers_procrastinate",
    ("procrastinate",),
    "SELECT count(*), extract(epoch FROM max(at)) FROM procrastinate_events "
    "WHERE type = 'succeeded' AND job_id BETWEEN %(a)s AND %(b)s",
    "procrastinate {version}: PsycopgConnector (psycopg 3, pool of concurrency + 2), "
    "run_worker_async(concurrency={c}), LISTEN/NOTIFY on, jobs kept, INFO logging as its CLI",
)
PGQUEUER = Peer(
    "pgqueuer",
    "bench.peers_pgqueuer",
    ("pgqueuer", "asyncpg"),
    "SELECT count(*), extract(epoch FROM max(created)) FROM pgqueuer_log "
    "WHERE status = 'successful' AND job_id BETWEEN %(a)s AND %(b)s",
    "PgQueuer {version}: asyncpg, durable tables, pgqueuer.run as `pgq run` (uvloop), "
    "max_concurrent_tasks={c}, batch_size={batch}, submitter Queries on an asyncpg pool",
)


# -- the peers' processes (bench/peers_*.py call process_main) -----------------------------------


class Recorder:
    """What a peer's worker process records: each no-op's insert → start latency."""

    def __init__(self) -> None:
        self.latency_ms: list[float] = []
        self.first_start = 0.0
        self.ready = asyncio.Event()  # the probe task ran: fetching and LISTEN work
        self.stop = asyncio.Event()  # SIGTERM: stop gracefully, write the record

    def started(self, submitted_at: float) -> None:
        now = time.time()
        if not self.latency_ms:
            self.first_start = now
        self.latency_ms.append((now - submitted_at) * 1000)


def peer_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["install", "submit", "work"])
    p.add_argument("--dsn", required=True)
    p.add_argument("--queue", default="bench_noop")
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=SUBMITTERS)  # submitters / worker slots
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--seconds", type=float, default=0.0)
    p.add_argument("--ready", type=Path, help="work: written once the worker ran its probe")
    p.add_argument("--out", type=Path, help="work: where the record goes (JSON)")
    p.add_argument("--timeout", type=float, default=900)
    return p.parse_args(argv)


async def serve(work: Any, args: argparse.Namespace) -> None:
    """Run a peer's `work(args, rec)` until SIGTERM (or --timeout), then write its record."""
    rec = Recorder()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, rec.stop.set)
    runner = asyncio.create_task(work(args, rec))
    ready = asyncio.create_task(rec.ready.wait())
    await asyncio.wait({runner, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if runner.done():
        runner.result()  # its error, if it failed to start
    if not rec.ready.is_set():
        raise TimeoutError("the worker did not run its probe task within 60 s")
    args.ready.write_text("ready\n")
    stopping = asyncio.create_task(rec.stop.wait())
    try:
        await asyncio.wait(
            {runner, stopping}, timeout=args.timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        rec.stop.set()
        await asyncio.wait_for(runner, 60)  # the worker's own error, if it stopped by itself
    record = {"count": len(rec.latency_ms), "first_start": rec.first_start}
    args.out.write_text(json.dumps(record | {"latency_ms": rec.latency_ms}))


def process_main(install: Any, submit: Any, work: Any, run: Any = asyncio.run) -> None:
    """`python -m bench.peers_<name> install|submit|work …`; submit prints one JSON line."""
    args = peer_args()
    if args.mode == "install":
        asyncio.run(install(args.dsn))
    elif args.mode == "submit":
        sys.stdout.write(json.dumps(asyncio.run(submit(args))) + "\n")
    else:
        run(serve(work, args))


# -- the rows -------------------------------------------------------------------------------------


async def _wait_done(dsn: str, sql: str, out: dict[str, Any], within: float) -> float:
    """Until the peer recorded every submitted job as done; the last completion's time."""
    span = {"a": out["min_id"], "b": out["max_id"]}
    deadline = time.monotonic() + within
    seen = 0
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = await (await conn.execute(sql, span)).fetchone()
            assert row is not None
            seen = int(row[0])
            if seen >= out["count"]:
                return float(row[1])
            await asyncio.sleep(0.05)
    raise TimeoutError(f"only {seen}/{out['count']} peer jobs done after {within:.0f} s")


async def _wait_file(path: Path, proc: procs.Proc, within: float) -> None:
    deadline = time.monotonic() + within
    while not await asyncio.to_thread(path.exists):
        if not proc.alive():
            raise RuntimeError(f"the peer worker exited; see {proc.log_path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the peer worker was not ready within {within:.0f} s")
        await asyncio.sleep(0.02)


@dataclass
class PeerRun:
    out: dict[str, Any]  # the submitter's: t0, t1, count, min_id, max_id
    record: dict[str, Any]  # the worker's: latency_ms, first_start
    done_at: float  # the last completion the peer recorded
    spent: Spent
    worker_cpu: float  # the peer worker's CPU seconds over the run
    submitter_cpu: float  # the submitter process's


async def _peer_run(ctx: Ctx, rt: Runtime, peer: Peer, tag: str, load: list[str]) -> PeerRun:
    """A fresh peer worker (ready), the load from its submitter, until every job is done."""
    dsn = rt.settings.libpq_url
    queue = f"bench_{tag}_{uuid.uuid4().hex[:6]}"
    ready, result = ctx.log(f"{peer.name}-{tag}.ready"), ctx.log(f"{peer.name}-{tag}.json")
    ready.unlink(missing_ok=True)
    wenv = env.worker_env(rt.settings)
    c = str(rt.settings.worker_max_jobs)
    base = ["--dsn", dsn, "--queue", queue]
    files = ["--ready", str(ready), "--out", str(result)]
    work = [sys.executable, "-m", peer.module, "work", *base, "--concurrency", c, *files]
    worker = procs.Proc(work, wenv, ctx.log(f"{peer.name}-{tag}-worker.log"))
    try:
        await _wait_file(ready, worker, 60)
        with recording(worker.pid, ctx.profile_to(f"{peer.name}-{tag}")), spending(ctx) as spent:
            w0, s0 = procs.cpu_seconds(worker.pid), _children_cpu()
            out = await asyncio.to_thread(
                procs.run_json, peer.module, ["submit", *base, *load], wenv, 600
            )
            submitter = _children_cpu() - s0
            done_at = await _wait_done(dsn, peer.done_sql, out, 600)
            used = procs.cpu_seconds(worker.pid) - w0
    finally:
        await asyncio.to_thread(worker.stop)
    return PeerRun(out, json.loads(result.read_text()), done_at, spent, used, submitter)


async def _install(rt: Runtime, peer: Peer, log: Path) -> str:
    """The peer's schema in the run database (its own installer); its version."""
    wenv = env.worker_env(rt.settings)
    args = [sys.executable, "-m", peer.module, "install", "--dsn", rt.settings.libpq_url]
    with procs.Proc(args, wenv, log) as p:
        await asyncio.to_thread(p.proc.wait, 120)
        if p.proc.returncode != 0:
            raise RuntimeError(f"{peer.module} install failed; see {log}")
    from importlib.metadata import version

    return version(peer.packages[0])


def _children_cpu() -> float:
    """CPU seconds of this process's children that exited and were waited for (a submitter)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _cpu(spent: list[Spent], side: dict[str, list[float]], n: int) -> str:
    """The machine's busy CPU per task, with the shares of PostgreSQL, the worker process and
    the submitter process (the rest: Redis, this process, anything else on the machine)."""
    machine = percentile([1000 * s.machine / n for s in spent], 50)
    pg = percentile([1000 * s.postgres / n for s in spent], 50)
    shares = [f"PostgreSQL {pg:.2f}"] if pg else []
    shares += [f"{k} {percentile(v, 50) * 1000 / n:.2f}" for k, v in side.items()]
    return f"{machine:.2f} ms ({', '.join(shares)})"


async def versus(ctx: Ctx, peer: Peer) -> list[Row]:
    peer.require()
    n, seconds = ctx.sizes.pipeline, ctx.sizes.rate_seconds
    burst = ["--count", str(n), "--concurrency", str(SUBMITTERS)]
    paced = ["--rate", str(RATE), "--seconds", str(seconds)]
    lat: dict[str, list[float]] = {"a50": [], "a99": [], "b50": [], "b99": []}
    cpu: dict[str, list[Spent]] = {"ours": [], "peer": []}
    procs_cpu: dict[str, dict[str, list[float]]] = {
        side: {"worker": [], "submitter": []} for side in ("ours", "peer")
    }
    async with (
        runtime(ctx.settings(f"vs-{peer.name}")) as rt,
        workers(ctx, rt, peer.name) as (ours_worker,),
    ):
        version = await _install(rt, peer, ctx.log(f"{peer.name}-install.log"))

        async def ours_rate(_: int) -> float:
            with spending(ctx) as spent:
                w0, s0 = procs.cpu_seconds(ours_worker.pid), _children_cpu()
                out, rows = await _ours(ctx, rt, burst, 600)
                procs_cpu["ours"]["worker"].append(procs.cpu_seconds(ours_worker.pid) - w0)
                procs_cpu["ours"]["submitter"].append(_children_cpu() - s0)
            cpu["ours"].append(spent)
            last = max(r.finished_at for r in rows).timestamp()
            return n / (float(last) - float(out["t0"]))

        async def peer_rate(i: int) -> float:
            run = await _peer_run(ctx, rt, peer, f"pipe{i}", burst)
            cpu["peer"].append(run.spent)
            procs_cpu["peer"]["worker"].append(run.worker_cpu)
            procs_cpu["peer"]["submitter"].append(run.submitter_cpu)
            return n / (run.done_at - float(run.out["t0"]))

        async def ours_latency(_i: int) -> float:
            _, rows = await _ours(ctx, rt, paced, 120 + seconds)
            ms = [(r.started_at - r.created_at).total_seconds() * 1000 for r in rows]
            lat["a50"].append(percentile(ms, 50))
            lat["a99"].append(percentile(ms, 99))
            return lat["a50"][-1]

        async def peer_latency(i: int) -> float:
            ms = (await _peer_run(ctx, rt, peer, f"lat{i}", paced)).record["latency_ms"]
            lat["b50"].append(percentile(ms, 50))
            lat["b99"].append(percentile(ms, 99))
            return lat["b50"][-1]

        a, b = await alternate(ctx.sizes.pipeline_runs, ours_rate, peer_rate)
        await alternate(ctx.sizes.long_runs, ours_latency, peer_latency)
        c = rt.settings.worker_max_jobs
        polls = f"{rt.settings.worker_poll_delay:g} / {rt.settings.worker_idle_poll_seconds:g} s"
    name = f"pipeline-{peer.name}"
    setup = peer.setup.format(version=version, c=c, batch=c // 2)
    return [
        Row(
            name,
            "tasks/s",
            a,
            b,
            Target("ratio>=", 1.0),
            note=f"baseline = {setup}; {n:,} no-op tasks from {SUBMITTERS} submitters, "
            f"worker concurrency {c} on both sides; machine CPU per task ours "
            f"{_cpu(cpu['ours'], procs_cpu['ours'], n)}, the peer "
            f"{_cpu(cpu['peer'], procs_cpu['peer'], n)}",
        ),
        Row(
            f"{name} p50",
            "ms",
            lat["a50"],
            lat["b50"],
            Target("ratio<=", 1.0),
            note=f"insert → start at {RATE:.0f} tasks/s for {seconds:.0f} s (both include the "
            f"accept); the peer's is measured to its task function's first line; ours is woken by "
            f"its send's publish (jobs/wake.py; busy / idle poll {polls})",
        ),
        Row(f"{name} p99", "ms", lat["a99"], lat["b99"]),
    ]


async def pipeline_procrastinate(ctx: Ctx) -> list[Row]:
    return await versus(ctx, PROCRASTINATE)


async def pipeline_pgqueuer(ctx: Ctx) -> list[Row]:
    return await versus(ctx, PGQUEUER)
