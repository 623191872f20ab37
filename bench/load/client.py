"""Simulated people for the load drill (one process; `python -m bench.load.client`).

Each person has the tasks page open: the "anything new?" list check every 2.5 s, the
notification badge every 5 s, the health badge every 10 s, and every unfinished task row of
theirs polled on the schedule the server writes into the row (`hx-trigger="load delay:Ns"`),
until the row comes back without `hx-get` (finished). New tasks — exports and reminders in turn
— are started through GraphQL at a fixed rate over this process's share of the people, as fast
as the schedule says whatever the answers take (open loop). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.load.http import Client, HTTPError, Response

ROW_POLL = re.compile(r'hx-get="([^"]+)" hx-trigger="load delay:([\d.]+)s"')
TASK_IDS = re.compile(r'data-task-id="(\d+)"')
EXPORT = (
    "mutation E($team: ID!, $q: String) { createExport(teamId: $team, filter: {q: $q}) "
    "{ __typename ... on Task { id } ... on TaskConflict { existingTask { id } } } }"
)
REMIND = (
    "mutation R($ticket: ID!, $at: DateTime!) { scheduleReminder(ticketId: $ticket, at: $at) "
    "{ __typename ... on Task { id } ... on TaskConflict { existingTask { id } } } }"
)
WORDS = ("invoice", "log in", "refund", "slow", "export", "spam", "locked", "order")


@dataclass
class Person:
    id: int
    cookie: str
    team: int
    tickets: list[int]
    newest: int = 0
    created: int = 0


@dataclass
class Tally:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    accepted: list[int] = field(default_factory=list)
    kinds: dict[int, str] = field(default_factory=dict)
    attached: int = 0
    finished_seen: int = 0
    first_error: str = ""
    error_kinds: Counter[str] = field(default_factory=Counter)


class Sim:
    def __init__(self, base: str, people: list[Person], args: argparse.Namespace) -> None:
        self.base = base
        self.people = people
        self.args = args
        self.tally = Tally()
        self.stop = asyncio.Event()
        self.followers: set[asyncio.Task[None]] = set()
        self.client = Client(base, args.connections)

    async def get(self, kind: str, person: Person, url: str) -> Response | None:
        headers = {"Cookie": person.cookie, "HX-Request": "true"}
        return await self._call(kind, self.client.get(url, headers))

    async def _call(self, kind: str, request: Any) -> Response | None:
        began = time.perf_counter()
        try:
            r: Response = await request
        except HTTPError as exc:
            self._error(kind, f"{type(exc).__name__}: {exc}".rstrip(": "))
            return None
        self.tally.latency[kind].append((time.perf_counter() - began) * 1000)
        if r.status_code >= 400:
            self._error(kind, f"{r.status_code}: {r.text[:200]}")
            return None
        return r

    def _error(self, kind: str, what: str) -> None:
        self.tally.errors[kind] += 1
        self.tally.error_kinds[f"{kind}: {what[:80]}"] += 1
        self.tally.first_error = self.tally.first_error or f"{kind}: {what}"

    async def every(self, person: Person, kind: str, seconds: float, url: Any) -> None:
        await asyncio.sleep(seconds * (person.id % 97) / 97)  # spread people over the period
        while not self.stop.is_set():
            r = await self.get(kind, person, url())
            if kind == "list" and r is not None and r.status_code == 200:
                person.newest = max([person.newest, *map(int, TASK_IDS.findall(r.text))])
            await asyncio.sleep(seconds)

    async def follow(self, person: Person, task_id: int) -> None:
        url, delay = f"/tasks/{task_id}", 0.0
        deadline = time.monotonic() + self.args.seconds + self.args.grace
        while time.monotonic() < deadline:
            await asyncio.sleep(delay)
            r = await self.get("row", person, url)
            if r is None:
                return
            found = ROW_POLL.search(r.text)
            if found is None:
                self.tally.finished_seen += 1
                return
            url, delay = found.group(1).replace("&amp;", "&"), float(found.group(2))

    async def create(self, i: int) -> None:
        person = self.people[i % len(self.people)]
        person.created += 1
        if i % 2 == 0:
            q = WORDS[(person.created + person.id) % len(WORDS)]
            body = {"query": EXPORT, "variables": {"team": str(person.team), "q": q}}
            kind = "EXPORT"
        else:
            ticket = person.tickets[(person.created // 2) % len(person.tickets)]
            at = datetime.now(UTC) + timedelta(seconds=10 + i % 10)
            body = {"query": REMIND, "variables": {"ticket": str(ticket), "at": at.isoformat()}}
            kind = "REMINDER"
        headers = {"Cookie": person.cookie}
        r = await self._call("create", self.client.post_json("/graphql", body, headers))
        if r is None:
            return
        result = next(iter((r.json().get("data") or {}).values()), None) or {}
        if result.get("__typename") == "Task":
            task_id = int(result["id"])
            self.tally.accepted.append(task_id)
            self.tally.kinds[task_id] = kind
        elif result.get("__typename") == "TaskConflict":
            task_id = int(result["existingTask"]["id"])
            self.tally.attached += 1
        else:
            self._error("create", r.text[:300])
            return
        follower = asyncio.create_task(self.follow(person, task_id))
        self.followers.add(follower)
        follower.add_done_callback(self.followers.discard)

    async def creator(self) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        pending = []
        for i in range(int(self.args.rate * self.args.seconds)):
            delay = start + i / self.args.rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            pending.append(asyncio.create_task(self.create(self.args.offset + i)))
        await asyncio.gather(*pending)

    async def run(self) -> dict[str, Any]:
        background = []
        for p in self.people:
            background += [
                asyncio.create_task(
                    self.every(p, "list", 2.5, lambda p=p: f"/tasks?newer_than={p.newest}&limit=20")
                ),
                asyncio.create_task(self.every(p, "badge", 5.0, lambda: "/notifications/badge")),
                asyncio.create_task(self.every(p, "health", 10.0, lambda: "/health/badge")),
            ]
        began = time.monotonic()
        await self.creator()
        await asyncio.sleep(max(0.0, self.args.seconds - (time.monotonic() - began)))
        self.stop.set()
        took = time.monotonic() - began
        if self.followers:  # let the rows of the last tasks see them finish
            await asyncio.wait(set(self.followers), timeout=self.args.grace)
        elapsed = time.monotonic() - began
        for t in background + list(self.followers):
            t.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        await self.client.aclose()
        t = self.tally
        return {
            "seconds": took,
            "elapsed": elapsed,
            "latency": t.latency,
            "errors": t.errors,
            "first_error": t.first_error,
            "error_kinds": dict(t.error_kinds.most_common(10)),
            "accepted": t.accepted,
            "kinds": t.kinds,
            "attached": t.attached,
            "finished_seen": t.finished_seen,
        }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True)
    p.add_argument("--people", required=True, help="JSON file: list of Person fields")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rate", type=float, default=10, help="new tasks per second (this process)")
    p.add_argument("--offset", type=int, default=0, help="first task number (alternates kinds)")
    p.add_argument("--grace", type=float, default=60)
    p.add_argument("--connections", type=int, default=100)
    args = p.parse_args()
    with open(args.people) as f:
        people = [Person(**d) for d in json.load(f)]
    result = asyncio.run(Sim(args.base, people, args).run())
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
