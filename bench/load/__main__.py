"""`python -m bench.load`: the load drill of issue 6.

200 people (in two client processes) keep the tasks page open, each with its page's one watcher
on the real schedule (issue 11; bench/load/client.py), while 20 new exports or reminders per second start for 60 s; two `taskdesk worker` processes
and one web process serve them, on the benchmark's own servers and a scratch database, with the
product's default quotas. Afterwards every accepted task must have completed exactly once
(bench/load/verify.py). Prints the report, writes it as JSON to bench/results/load-<time>.json,
and exits 1 when a request failed or a check did not hold.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import env, procs
from bench.harness import runtime, wait_worker_ready
from bench.load import setup, verify
from bench.load.report import render
from bench.profiling import recording
from bench.stats import machine
from bench.web import OURS, serve


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    p.add_argument("--people", type=int, default=200)
    p.add_argument("--rate", type=float, default=20.0, help="new tasks per second, in all")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--clients", type=int, default=2, help="load-generating processes")
    p.add_argument("--web", type=int, default=1, help="web processes (uvicorn --workers)")
    p.add_argument(
        "--tickets",
        type=int,
        default=None,
        help="tickets of the Load team (default 5,000, or 12 a person for more than 400 people: "
        "each person needs 4 open assigned tickets to remind on)",
    )
    p.add_argument(
        "--profile", action="store_true", help="py-spy the web and worker processes meanwhile"
    )
    p.add_argument(
        "--timeline",
        action="store_true",
        help="keep every request's time and answer, and print asked, served and p99 per 10 s",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the web and worker processes (an experiment), e.g. db_pool_size=20",
    )
    args = p.parse_args(argv)
    args.tickets = args.tickets or max(5000, 12 * args.people)
    return args


def _spy(args: argparse.Namespace, logs: Path, name: str) -> Path | None:
    return logs / f"profile-{name}.txt" if args.profile else None


def _cpu(pids: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(procs.tree_cpu_seconds(p) for p in ps) for name, ps in pids.items()}


async def drill(
    args: argparse.Namespace, servers: env.Servers, db_url: str, logs: Path
) -> dict[str, Any]:
    # The product's default quotas and rate limits apply here (unlike the micro-benchmarks).
    settings = env.settings_for(db_url, servers.redis_url, env.new_prefix("load"))
    wenv = env.worker_env(settings) | setup.PRODUCT_LIMITS
    async with runtime(settings) as rt:
        team, people = await setup.prepare(rt, args.people, args.tickets, logs / "seed.log")
        with ExitStack() as stack:
            workers = [
                stack.enter_context(procs.worker(wenv, logs / f"load-worker{i}.log"))
                for i in range(args.workers)
            ]
            await wait_worker_ready(rt.redis, settings.queue_prefix, args.workers)
            web = stack.enter_context(
                serve(OURS, wenv, logs / "load-web.log", _spy(args, logs, "web"), args.web)
            )
            for i, w in enumerate(workers):
                stack.enter_context(recording(w.pid, _spy(args, logs, f"worker{i}")))
            extra = ("--timeline",) if args.timeline else ()
            clients = setup.start_clients(args, web.url, people, wenv, logs, extra)
            pids = {
                "web": [web.pid],
                "workers": [w.pid for w in workers],
                "clients": [c.pid for c in clients],
                "postgresql": [p for p in [servers.postmaster_pid()] if p],
            }
            cpu0, t0 = _cpu(pids), time.monotonic()
            await asyncio.sleep(args.seconds)
            cpu1, t1 = _cpu(pids), time.monotonic()
            # A client bounds itself at seconds + 2 x 60 s of grace, then closes its pages; with
            # 500 pages a process that close takes minutes on a busy machine (1000-person drill).
            results = [
                await asyncio.to_thread(procs.collect_json, c, args.seconds + 480) for c in clients
            ]
            accepted = [i for r in results for i in r["accepted"]]
            unfinished = await verify.wait_finished(rt, accepted, 180)
        checked = await verify.verify(rt, team, accepted)
    cpu = {k: 100 * (cpu1[k] - cpu0[k]) / (t1 - t0) for k in cpu0 if pids[k]}
    return {"clients": results, "verify": checked, "unfinished": unfinished, "cpu_pct": cpu}


async def _main(args: argparse.Namespace) -> int:
    for item in args.set:
        name, _, value = item.partition("=")
        env.EXTRA_OVERRIDES[name.strip().lower()] = value.strip()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = env.ROOT / "bench" / "results" / "logs" / f"load-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    servers = await asyncio.to_thread(env.open_servers)
    try:
        name, url = await asyncio.to_thread(env.empty_db, servers, logs / "seed.log")
        try:
            outcome = await drill(args, servers, url, logs)
        finally:
            await asyncio.to_thread(env.drop_db, servers, name)
    finally:
        await asyncio.to_thread(servers.close)
    text, ok = render(args, outcome)
    if args.timeline:  # every request, for a closer look than the report's 10 s slots
        rows = [e for c in outcome["clients"] for e in c.get("timeline", [])]
        (logs / "timeline.json").write_text(json.dumps(sorted(rows)))
    print(text)
    path = env.ROOT / "bench" / "results" / f"load-{stamp}.json"
    summary = {k: v for k, v in outcome.items() if k != "clients"}
    summary["report"] = text
    path.write_text(
        json.dumps({"when": stamp, "machine": machine(), "args": vars(args), **summary}, indent=2)
    )
    print(f"\nJSON: {path.relative_to(env.ROOT)}; logs: {logs.relative_to(env.ROOT)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_main(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
