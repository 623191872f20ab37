"""`python -m bench [--quick] [--only NAME,…]`: run the benchmark table of issue 6 and print it.

Prepares servers and data (bench/env.py), runs each benchmark (ours and its baseline alternately),
prints one row per measured statistic, and writes the run as JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from bench import (
    b_burst,
    b_export,
    b_ledger,
    b_metrics,
    b_pipeline,
    b_reminders,
    b_search,
    b_snapshot,
    env,
)
from bench.b_limits import hung_task
from bench.b_noisy import noisy_team
from bench.b_peers import pipeline_pgqueuer, pipeline_procrastinate  # needs: uv sync --group bench
from bench.harness import FULL, QUICK, Ctx, load_people, runtime
from bench.stats import Row, save, table

Bench = Callable[[Ctx], Awaitable[list[Row]]]


def registry() -> dict[str, Bench]:
    """Every benchmark, in the order the table lists them."""
    from bench import (
        b_attachments,
        b_conversation,
        b_feed,
        b_http,
        b_import,
        b_inbound,
        b_sla,
        b_subscribe,
    )

    return {
        "export-100k": b_export.export_100k,
        "export-1m-memory": b_export.export_1m_memory,
        "pipeline": b_pipeline.pipeline,
        "start-latency": b_pipeline.start_latency,
        "pipeline-procrastinate": pipeline_procrastinate,
        "pipeline-pgqueuer": pipeline_pgqueuer,
        "hung-task": hung_task,
        "noisy-team": noisy_team,
        "reminder-lateness": b_reminders.reminder_lateness,
        "reminder-burst": b_burst.reminder_burst,
        "status-read": b_http.status_read,
        "trigger": b_http.trigger,
        "search": b_search.search,
        "sweep": b_ledger.sweep,
        "long-snapshot": b_snapshot.long_snapshot,
        "metrics-scrape": b_metrics.scrape,
        "import-100k": b_import.import_100k,
        "unchanged-tick": b_feed.unchanged_tick,
        "subscription-latency": b_subscribe.latency,
        "idle-subscriptions": b_subscribe.idle,
        "conversation-post": b_conversation.post,
        "conversation-page": b_conversation.page,
        "attachment-20mb": b_attachments.attachment_20mb,
        "conversation-live": b_conversation.live,
        "inbound": b_inbound.inbound,
        "fetch-lag": b_inbound.fetch_lag,
        "sla-timers": b_sla.sla_timers_row,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small data, few runs (< 2 minutes)")
    p.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--runs", type=int, default=0, help="alternations per benchmark (override)")
    p.add_argument("--keep-db", action="store_true", help="keep this run's scratch database")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every process under test, e.g. --set worker_poll_delay=0.01 "
        "(an experiment: the JSON records it)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the workers and web processes (results/logs/<time>/profile-*.txt)",
    )
    return p.parse_args(argv)


async def run_all(ctx: Ctx, chosen: dict[str, Bench]) -> list[Row]:
    rows: list[Row] = []
    for name, bench in chosen.items():
        began = time.monotonic()
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        try:
            got = await bench(ctx)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            got = [Row(name, "", [], note=f"error: {type(exc).__name__}: {exc}"[:300])]
        took = time.monotonic() - began
        print(f"bench: {name} done in {took:.0f} s", file=sys.stderr, flush=True)
        rows += got
    return rows


async def _main(args: argparse.Namespace) -> int:
    all_benches = registry()
    if args.list:
        print("\n".join(all_benches))
        return 0
    names = [n for n in args.only.split(",") if n] or list(all_benches)
    unknown = [n for n in names if n not in all_benches]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    for item in args.set:
        name, _, value = item.partition("=")
        env.EXTRA_OVERRIDES[name.strip().lower()] = value.strip()
    sizes = QUICK if args.quick else FULL
    if args.runs > 0:
        sizes = dataclasses.replace(
            sizes, runs=args.runs, long_runs=args.runs, pipeline_runs=args.runs
        )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs = env.ROOT / "bench" / "results" / "logs" / stamp
    logs.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    servers = await asyncio.to_thread(env.open_servers)
    try:
        data = {env.BIG_TEAM: sizes.big, env.SMALL_TEAM: sizes.small}
        name, url = await asyncio.to_thread(env.prepare_data, servers, data, logs / "seed.log")
        ctx = Ctx(args.quick, sizes, servers, name, url, logs, profile=args.profile)
        try:
            async with runtime(ctx.settings("people")) as rt:
                ctx.people = await load_people(rt)
            rows = await run_all(ctx, {n: all_benches[n] for n in names})
        finally:
            if not args.keep_db:
                await asyncio.to_thread(env.drop_db, servers, name)
    finally:
        await asyncio.to_thread(servers.close)
    took = time.monotonic() - began
    print(table(rows))
    meta = {"quick": args.quick, "seconds": round(took), "only": names, "sizes": vars(sizes)}
    meta["settings"] = dict(env.EXTRA_OVERRIDES)
    path = save(rows, env.ROOT / "bench" / "results", meta)
    print(f"\n{len(rows)} rows in {took:.0f} s; JSON: {path.relative_to(env.ROOT)}")
    return 1 if any(r.verdict == "error" for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_main(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
