"""The load drill's data: a team "Load" of N staff people with generated tickets, and the
signed-in people (session cookies, their team, the open assigned tickets they may remind on);
the client processes that play them (also used by bench/hosts)."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench import env, procs
from bench.load.client import Person
from bench.web import session_cookie
from desk.core.runtime import Runtime

TEAM = "Load"
# The product's default quotas and rate limits (bench/env.py raises them for the micro-benchmarks;
# the drills run with these).
PRODUCT_LIMITS = {
    "EXPORT_MAX_PER_HOUR": "20",
    "EXPORT_MAX_ACTIVE_PER_USER": "3",
    "MUTATION_RATE_PER_MINUTE": "120",
}


async def create_team(rt: Runtime, people: int) -> tuple[int, list[int]]:
    emails = [f"load-{i:03d}@bench.test" for i in range(people)]
    async with rt.engine.begin() as conn:
        team = (
            await conn.execute(
                sa.text("INSERT INTO team (name) VALUES (:n) RETURNING id"), {"n": TEAM}
            )
        ).scalar_one()
        ids = [
            r.id
            for r in await conn.execute(
                sa.text(
                    "INSERT INTO app_user (email, display_name) "
                    "SELECT e, 'Load ' || e FROM unnest(CAST(:e AS text[])) e RETURNING id"
                ),
                {"e": emails},
            )
        ]
        await conn.execute(
            sa.text(
                "INSERT INTO membership (user_id, team_id, role) "
                "SELECT u, :t, 'STAFF' FROM unnest(CAST(:ids AS int[])) u"
            ),
            {"t": team, "ids": ids},
        )
    return int(team), sorted(ids)


async def remindable(rt: Runtime, team: int) -> list[int]:
    """Open tickets with a staff assignee: a reminder on one notifies exactly one person."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT id FROM ticket WHERE team_id = :t AND status IN ('OPEN', 'PENDING') "
                "AND assignee_id IS NOT NULL ORDER BY id"
            ),
            {"t": team},
        )
        return [r.id for r in rows]


async def prepare(rt: Runtime, people: int, tickets: int, log: Path) -> tuple[int, list[Person]]:
    team, ids = await create_team(rt, people)
    s = rt.settings
    await asyncio.to_thread(env.seed, s.libpq_url, s.redis_url, tickets, TEAM, log)
    open_tickets = await remindable(rt, team)
    if len(open_tickets) < 4 * people:
        raise RuntimeError(f"only {len(open_tickets)} remindable tickets for {people} people")
    return team, [
        Person(uid, session_cookie(s, uid), team, open_tickets[i :: len(ids)])
        for i, uid in enumerate(ids)
    ]


def people_json(people: list[Person]) -> list[dict[str, Any]]:
    return [asdict(p) for p in people]


def start_clients(
    args: argparse.Namespace,
    base: str,
    people: list[Person],
    wenv: dict[str, str],
    logs: Path,
    extra: tuple[str, ...] = (),
) -> list[subprocess.Popen[str]]:
    """`args.clients` processes of bench/load/client.py sharing `people`, `args.rate` new tasks/s
    in all, for `args.seconds`, against `base`; `extra` goes to each one's command line."""
    share = -(-len(people) // args.clients)
    clients = []
    for i in range(args.clients):
        path = logs / f"load-people{i}.json"
        path.write_text(json.dumps(people_json(people[i * share : (i + 1) * share])))
        argv = ["--base", base, "--people", str(path), "--seconds", str(args.seconds)]
        argv += ["--rate", str(args.rate / args.clients), *extra]
        clients.append(
            procs.spawn_json("bench.load.client", argv, wenv, logs / f"load-client{i}.log")
        )
    return clients
