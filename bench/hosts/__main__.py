"""`python -m bench.hosts`: the many-host drill of issue 24 ("Many hosts, one budget").

Three "hosts" (a web process and its workers each, 4 workers spread 2+1+1, each host with its
own environment and ports; bench/hosts/fleet.py) share the bench's PostgreSQL and Redis behind
HAProxy (round robin, health checks; bench/hosts/balancer.py). The load drill's people
(bench/load: 200 people polling, 20 new tasks/s for 60 s) talk to the balancer. At 40 % of the
window one whole host is killed with SIGKILL, web and workers, and the load goes on. Afterwards:
no accepted task lost or done twice (bench/load/verify.py; the hosts run with a 10 s lease so
the dead workers' tasks are rescued soon), the balancer kept answering, and the PostgreSQL
connections sampled meanwhile stayed within the budget of the hosts' pools
(bench/hosts/connections.py). Prints the report, writes it as JSON to
bench/results/hosts-<time>.json, and exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import env, procs
from bench.harness import runtime, wait_worker_ready
from bench.hosts import balancer, fleet, report
from bench.hosts.connections import DRILL, Sampler, budget, pooled_budget
from bench.load import setup, verify
from bench.stats import machine
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from tests.pgbouncer import BINARY, pgbouncer


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.hosts", description=__doc__)
    p.add_argument("--people", type=int, default=200)
    p.add_argument("--rate", type=float, default=20.0, help="new tasks per second, in all")
    p.add_argument("--seconds", type=float, default=60.0, help="the load window")
    p.add_argument("--hosts", type=int, default=3, help="hosts, each with one web process")
    p.add_argument("--workers", type=int, default=4, help="workers over all hosts")
    p.add_argument("--spread", help="workers per host, e.g. 2,1,1 (default: even, first hosts +1)")
    p.add_argument("--kill-at", type=float, default=0.4, help="when, as a share of the window")
    p.add_argument("--kill-host", type=int, default=1, help="which host dies (1 = the first)")
    p.add_argument("--lease-seconds", type=float, default=10.0, help="the hosts' LEASE_SECONDS")
    p.add_argument(
        "--settle",
        type=float,
        default=5.0,
        help="seconds after the kill within which requests may fail (in flight on the dead "
        "host, or sent before its health checks failed); a later failure fails the drill",
    )
    p.add_argument(
        "--pgbouncer",
        type=int,
        default=0,
        metavar="POOL",
        help="the hosts reach PostgreSQL through a real PgBouncer in transaction mode with a "
        "pool of POOL server connections (DB_POOLER=transaction; listeners direct)",
    )
    p.add_argument("--clients", type=int, default=2, help="load-generating processes")
    p.add_argument("--tickets", type=int, default=None, help="as bench.load's --tickets")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every host's processes (an experiment), e.g. db_pool_size=3",
    )
    args = p.parse_args(argv)
    args.tickets = args.tickets or max(5000, 12 * args.people)
    args.counts = fleet.parse_spread(args.spread, args.workers, args.hosts)
    if not 1 <= args.kill_host <= args.hosts or not 0 < args.kill_at < 1:
        p.error("--kill-host must name a host (1..hosts) and --kill-at lie between 0 and 1")
    return args


async def _start(
    stack: ExitStack, args: argparse.Namespace, wenv: dict[str, str], logs: Path
) -> tuple[list[fleet.Host], balancer.Balancer]:
    """The hosts, then the balancer over their web processes (in a thread: the sampler goes on)."""
    names = [f"host{i + 1}" for i in range(args.hosts)]
    hosts = [
        await asyncio.to_thread(fleet.start, stack, name, wenv, n, logs)
        for name, n in zip(names, args.counts, strict=True)
    ]
    members = {h.name: h.web.url.removeprefix("http://") for h in hosts}
    lb = await asyncio.to_thread(stack.enter_context, balancer.run(members, logs))
    return hosts, lb


async def _load(
    args: argparse.Namespace, rt: Runtime, settings: Settings, people: list[Any], logs: Path
) -> dict[str, Any]:
    with ExitStack() as stack:
        wenv = env.worker_env(await _hosts_settings(stack, args, settings)) | setup.PRODUCT_LIMITS
        hosts, lb = await _start(stack, args, wenv, logs)
        await wait_worker_ready(
            rt.redis, settings.queue_prefix, sum(args.counts), fleet.READY_WITHIN
        )
        asked = await asyncio.to_thread(balancer.requests, lb.socket)
        clients = setup.start_clients(args, lb.url, people, wenv, logs, ("--timeline",))
        # The window starts with the clients' first request (they take a second or two to
        # start), so the kill falls at its share of the window as the people see it.
        await asyncio.to_thread(
            procs.wait_until,
            lambda: balancer.requests(lb.socket) > asked,
            60,
            "the clients' first request",
            0.02,
        )
        began = time.time()
        await asyncio.sleep(args.kill_at * args.seconds)
        victim = hosts[args.kill_host - 1]
        killed_at = time.time()
        killed = fleet.kill(victim)
        await asyncio.sleep(max(0.0, began + args.seconds - time.time()))
        ended = time.time()
        results = [
            await asyncio.to_thread(procs.collect_json, c, args.seconds + 480) for c in clients
        ]
        accepted = [i for r in results for i in r["accepted"]]
        unfinished = await verify.wait_finished(rt, accepted, 180)
        members = await asyncio.to_thread(balancer.stats, lb.socket)
    return {
        "clients": results,
        "accepted_ids": accepted,
        "unfinished": unfinished,
        "began": began,
        "killed_at": killed_at,
        "ended": ended,
        "victim": victim.name,
        "killed_pids": killed,
        "hosts": {h.name: {"web": h.web.url, "metrics_ports": h.metrics_ports} for h in hosts},
        "balancer": members,
        "balancer_log": (logs / "haproxy.log").read_text(errors="replace"),
        "balancer_config": str(lb.config.relative_to(env.ROOT)),
    }


async def _hosts_settings(
    stack: ExitStack, args: argparse.Namespace, settings: Settings
) -> Settings:
    """The drill's own settings, or with `--pgbouncer` the same through a real PgBouncer (in
    transaction mode; migrations and listeners keep the direct URL)."""
    if not args.pgbouncer:
        return settings
    url = await asyncio.to_thread(
        stack.enter_context, pgbouncer(settings.libpq_url, pool_size=args.pgbouncer)
    )
    over = {"database_url": url, "direct_database_url": settings.database_url}
    return settings.model_copy(update=over | {"db_pooler": "transaction"})


async def _created(rt: Runtime, ids: list[int]) -> dict[int, float]:
    """When each of these tasks was accepted (wall clock), to match it with a failed request."""
    rows = await rt.pg.all(
        "SELECT id, extract(epoch FROM created_at)::float8 AS t FROM background_task "
        "WHERE id = ANY(%s)",
        (ids,),
    )
    return {int(r["id"]): float(r["t"]) for r in rows}


async def drill(
    args: argparse.Namespace, servers: env.Servers, db: tuple[str, str], logs: Path
) -> dict[str, Any]:
    settings = env.settings_for(
        db[1], servers.redis_url, env.new_prefix("hosts"), lease_seconds=args.lease_seconds
    )
    async with runtime(settings) as rt:
        team, people = await setup.prepare(rt, args.people, args.tickets, logs / "seed.log")
        sampler, stop = Sampler(servers.admin_url, db[0]), asyncio.Event()
        sampling = asyncio.create_task(sampler.run(stop))
        try:
            outcome = await _load(args, rt, settings, people, logs)
        finally:
            stop.set()
            await sampling
        outcome["verify"] = await verify.verify(rt, team, outcome.pop("accepted_ids"))
        outcome["strangers_created"] = await _created(rt, outcome["verify"]["strangers"])
        with servers.admin() as conn:
            row = conn.execute("SHOW max_connections").fetchone()
    names = [f"host{i + 1}" for i in range(args.hosts)]
    outcome["connections"] = sampler.summary(names)
    outcome["budget"] = vars(
        pooled_budget(settings, args.hosts, args.workers, args.pgbouncer)
        if args.pgbouncer
        else budget(settings, args.hosts, args.workers)
    )
    outcome["max_connections"] = int(row[0]) if row else None
    return outcome


async def _main(args: argparse.Namespace) -> int:
    if balancer.binary() is None:
        print(balancer.INSTALL, file=sys.stderr)
        return 2
    for item in args.set:
        name, _, value = item.partition("=")
        env.EXTRA_OVERRIDES[name.strip().lower()] = value.strip()
    # libpq names every connection of this process (and of its setup's subprocesses) so; each
    # host's processes get their own name (bench/hosts/fleet.py).
    os.environ["PGAPPNAME"] = DRILL
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = env.ROOT / "bench" / "results" / "logs" / f"hosts-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    servers = await asyncio.to_thread(env.open_servers)
    try:
        db = await asyncio.to_thread(env.empty_db, servers, logs / "seed.log")
        try:
            outcome = await drill(args, servers, db, logs)
        finally:
            await asyncio.to_thread(env.drop_db, servers, db[0])
    finally:
        await asyncio.to_thread(servers.close)
    outcome["load_average"] = {"before": load_before, "after": os.getloadavg()}
    text, ok, figures = report.render(args, outcome)
    print(text)
    path = env.ROOT / "bench" / "results" / f"hosts-{stamp}.json"
    summary = {k: v for k, v in outcome.items() if k not in ("clients", "balancer_log")}
    doc = {"when": stamp, "machine": machine(), "args": vars(args), **summary, **figures}
    path.write_text(json.dumps(doc | {"report": text}, indent=2, default=str))
    print(f"\nJSON: {path.relative_to(env.ROOT)}; logs: {logs.relative_to(env.ROOT)}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pgbouncer and not Path(BINARY).exists():
        print("--pgbouncer needs Debian's pgbouncer: apt-get install -y pgbouncer", file=sys.stderr)
        return 2
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
