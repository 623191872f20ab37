"""`taskdesk seed`: the demo teams and people (idempotent), or many generated tickets (COPY)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from desk.core.settings import ConfigError, Env, Settings
from taskdesk.commands import Subparsers, add_data_dir, with_runtime


def register(subparsers: Subparsers) -> None:
    p = subparsers.add_parser(
        "seed",
        help="add demo data, or many generated tickets",
        description="Without options: create the demo teams 'Acme Support' and 'Globex', their "
        "people (known passwords) and ~230 tickets; running it again changes nothing. "
        "With --tickets N: add N generated tickets to --team quickly (PostgreSQL COPY), "
        "for benchmarks; this adds rows every time.",
    )
    p.add_argument(
        "--tickets", type=_positive, metavar="N", help="add N generated tickets (e.g. 1000000)"
    )
    p.add_argument(
        "--team",
        default="Acme Support",
        metavar="NAME",
        help="team that gets the generated tickets (default: %(default)s)",
    )
    p.add_argument(
        "--allow-prod",
        action="store_true",
        help="allow the demo people (with public passwords) when TASKDESK_ENV=prod",
    )
    add_data_dir(p)
    # The settings' pool: the bulk seed writes on several connections at once.
    p.set_defaults(func=with_runtime(_seed, pool_size=None, quiet=False, refuse=_refuse_prod))


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _refuse_prod(settings: Settings, args: argparse.Namespace) -> None:
    if settings.taskdesk_env is Env.PROD and not args.allow_prod:
        raise ConfigError(
            "taskdesk seed: refusing to create demo users with public passwords while "
            "TASKDESK_ENV=prod (pass --allow-prod if you really mean it)"
        )


async def _seed(rt: Any, args: argparse.Namespace) -> None:
    from desk.seed import demo as seed

    tickets, team = args.tickets, args.team
    # Bulk data for a demo team needs the demo people; another team brings its own.
    if tickets is None or team in seed.DEMO_TEAMS:
        report = await seed.seed_demo(rt)
        print(
            f"taskdesk: demo data ready (created {report.teams} teams, {report.users} users, "
            f"{report.memberships} memberships, {report.tickets} tickets, "
            f"{report.messages} messages)",
            file=sys.stderr,
        )
    if tickets:
        began = time.perf_counter()

        def progress(done: int, total: int) -> None:
            took = time.perf_counter() - began
            print(f"  {done:,} / {total:,} tickets ({took:.1f} s)", file=sys.stderr)

        bulk = await seed.seed_bulk(rt, team, tickets, progress=progress)
        rate = bulk.rows / bulk.seconds if bulk.seconds else 0
        print(
            f"taskdesk: added {bulk.rows:,} tickets to {team!r} in {bulk.seconds:.1f} s "
            f"({rate:,.0f} rows/s)",
            file=sys.stderr,
        )
