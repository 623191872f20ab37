"""`python -m bench.idle_worker [--seconds 10] [--runs 2] [--set NAME=VALUE …]`: the CPU an idle
worker burns. One real `python -m jobs.worker` at a time on the bench's servers (bench/env.py: a
migrated scratch database with the demo people, its own Redis prefix), registered (its dispatcher
swept), then its user + system CPU seconds over `--seconds` with nothing to do, from /proc. Prints
one line per run and the median as a share of one core. What an idle worker does then: its
lanes' polls of Redis (WORKER_POLL_DELAY, or WORKER_IDLE_POLL_SECONDS with wake-ups), the
dispatcher's and heartbeat's passes, the rescuer, janitor, pruner and scheduler.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

from bench import env, procs
from bench.harness import clear_namespace, runtime, wait_worker_ready

LOGS = Path(__file__).parent / "results" / "logs"


def _parse_set(items: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants NAME=VALUE, not {item!r}")
        out[name.strip().lower()] = value
    return out


async def one_run(db_url: str, redis_url: str, seconds: float, over: dict[str, object]) -> float:
    """CPU seconds of one fresh idle worker over `seconds`."""
    settings = env.settings_for(db_url, redis_url, env.new_prefix("idle"), **over)
    async with runtime(settings) as rt:
        LOGS.mkdir(parents=True, exist_ok=True)
        with procs.worker(env.worker_env(settings), LOGS / "idle-worker.log") as w:
            await wait_worker_ready(rt.redis, settings.queue_prefix, 1)
            before = procs.cpu_seconds(w.pid)
            await asyncio.sleep(seconds)  # the measured window: the worker is left alone
            used = procs.cpu_seconds(w.pid) - before
            if not w.alive():
                raise RuntimeError(f"the worker exited; see {w.log_path}")
        await clear_namespace(rt.redis, settings.queue_prefix)
    return used


async def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.idle_worker", description=__doc__)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--set", action="append", default=[], help="a worker setting, NAME=VALUE")
    args = p.parse_args(argv)
    over = _parse_set(args.set)
    servers = env.open_servers()
    try:
        name, db_url = await asyncio.to_thread(env.empty_db, servers, LOGS / "idle-seed.log")
        try:
            used = []
            for i in range(args.runs):
                used.append(await one_run(db_url, servers.redis_url, args.seconds, over))
                print(f"run {i + 1}: {used[-1]:.2f} CPU s in {args.seconds:g} s", flush=True)
            share = statistics.median(used) / args.seconds * 100
            print(
                f"idle worker: median {statistics.median(used):.2f} CPU s = {share:.1f} % of a core"
            )
        finally:
            env.drop_db(servers, name)
    finally:
        servers.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
