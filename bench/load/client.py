"""Simulated people for the load drill (one process; `python -m bench.load.client`).

Each person has the tasks page open and does what its one watcher does (ui/static/ui.js,
ui/watch/watcher.py): one `GET /watch` per tick carrying the page's unfinished rows, the bell's count,
the badge's version and the list's newest id; a 204 changes nothing, a 200 brings the changed
fragments (rows, bell, badge, list) whose attributes the next tick sends back. The next tick is
the answer's `X-Poll-In` (the rows' schedule, at least every 5 s); a 503 or 429 waits for its
`Retry-After`; a failed request backs off 2, 4, 8 … s. Tasks started elsewhere reach the page
through the list. New tasks — exports and reminders in turn — are started through GraphQL at a
fixed rate over this process's share of the people, whatever the answers take (open loop).
A 503 without `Retry-After` is not the app's refusal (its 503s always carry one) but a proxy's
"no server answered": it counts as a failed request. With `--timeline`, every request's start
(wall clock), kind, status, duration and outcome are kept too (bench/hosts splits them at the
moment it kills a host). Prints one JSON line.
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
from urllib.parse import quote

from bench.load.http import Client, HTTPError, Response

ROW = re.compile(r"<li id=\"task-(\d+)\"[^>]*>")
ATTR = re.compile(r'(data-[a-z-]+)(?:="([^"]*)")?')
BELL = re.compile(r'id="bell"[^>]*data-seen="(-?\d+)"')
HEALTH = re.compile(r'id="health"[^>]*data-v="([^"]*)"')
MAX_ROWS = 60  # ui/watch/watcher.py MAX_ROWS
NEWEST = re.compile(r'data-newest="(\d+)"')
FINISHED = {"Completed", "Skipped", "Failed", "Cancelled", "Expired"}
IDLE, HIDDEN = 5.0, 30.0  # ui.js: the idle tick, a hidden tab's
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
class PageState:
    """What one person's open tasks page shows, as its watcher sends it back."""

    # task id -> its query parameter, "r=id:since:version:cancel" quoted once when it changes
    rows: dict[int, str] = field(default_factory=dict)
    bell: int = -1
    health: str = ""
    newest: int = 0
    mark: int = 0  # X-Watch-Mark: the list checked up to this id (ui.js keeps it so)
    fails: int = 0

    def url(self) -> str:
        # As ui.js: at most MAX_ROWS rows a tick, the newest (on top of the page) first.
        newest_rows = sorted(self.rows.items(), reverse=True)[:MAX_ROWS]
        parts = [t for _, t in newest_rows]
        parts += [f"bell={self.bell}", f"h={quote(self.health)}", "list=tasks"]
        parts += [f"newest={self.newest}", "limit=20"]
        parts += [f"mark={self.mark}"] if self.mark else []
        return "/watch?" + "&".join(parts)

    def take(self, html: str) -> list[int]:
        """Apply a 200 answer; the ids of rows seen finished in it."""
        finished = []
        if 'id="tasks" hx-swap-oob="innerHTML"' in html:  # the whole list: it replaces the rows
            self.rows.clear()
        self.newest = max([self.newest, *map(int, NEWEST.findall(html))])  # newer rows: on top
        for m in ROW.finditer(html):
            task_id, attrs = int(m.group(1)), dict(ATTR.findall(m.group(0)))
            if "data-poll" in attrs:
                since, version = attrs["data-since"], attrs["data-v"]
                token = f"{task_id}:{since}:{version}:{attrs['data-cancel']}"
                self.rows[task_id] = f"r={quote(token, safe=':')}"
                continue
            self.rows.pop(task_id, None)
            if attrs.get("data-status") in FINISHED:
                finished.append(task_id)
        if bell := BELL.search(html):
            self.bell = int(bell.group(1))
        if health := HEALTH.search(html):
            self.health = health.group(1)
        return finished


@dataclass
class Tally:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    accepted: list[int] = field(default_factory=list)
    kinds: dict[int, str] = field(default_factory=dict)
    attached: int = 0
    finished_seen: set[int] = field(default_factory=set)
    body_bytes: Counter[str] = field(default_factory=Counter)  # kind -> bytes of its 200s
    first_error: str = ""
    error_kinds: Counter[str] = field(default_factory=Counter)
    # (wall-clock start, kind, status or 0 for a failed request, ms, "s"erved/"r"efused/"e"rror)
    timeline: list[tuple[float, str, int, float, str]] = field(default_factory=list)


class Sim:
    def __init__(self, base: str, people: list[Person], args: argparse.Namespace) -> None:
        self.base = base
        self.people = people
        self.args = args
        self.tally = Tally()
        self.stop = asyncio.Event()
        self.client = Client(base, args.connections)
        self.pages = {p.id: PageState(newest=p.newest) for p in people}

    async def _call(self, kind: str, request: Any) -> Response | None:
        """The answer, or None after a failed request; a 503/429 is an answer (a refusal)."""
        began, wall = time.perf_counter(), time.time()
        try:
            r: Response = await request
        except HTTPError as exc:
            self._error(kind, f"{type(exc).__name__}: {exc}".rstrip(": "))
            self._mark(wall, kind, 0, began, "e")
            return None
        if r.status_code == 503 and "retry-after" not in r.headers:
            self._error(kind, "503 without Retry-After: no server answered (a proxy's)")
            self._mark(wall, kind, r.status_code, began, "e")
            return None
        self.tally.latency[kind].append((time.perf_counter() - began) * 1000)
        self.tally.statuses[kind][r.status_code] += 1
        outcome = "s"
        if r.status_code == 200:
            self.tally.body_bytes[kind] += len(r.content)
        if r.status_code in (429, 503):
            outcome = "r"
        elif r.status_code >= 400:
            outcome = "e"
            self._error(kind, f"{r.status_code}: {r.text[:200]}")
        self._mark(wall, kind, r.status_code, began, outcome)
        return r

    def _mark(self, wall: float, kind: str, status: int, began: float, outcome: str) -> None:
        if self.args.timeline:
            ms = (time.perf_counter() - began) * 1000
            self.tally.timeline.append((round(wall, 3), kind, status, round(ms, 2), outcome))

    def _error(self, kind: str, what: str) -> None:
        self.tally.errors[kind] += 1
        self.tally.error_kinds[f"{kind}: {what[:80]}"] += 1
        self.tally.first_error = self.tally.first_error or f"{kind}: {what}"

    async def watch_once(self, person: Person, page: PageState) -> float:
        """One tick of the person's watcher; seconds until the next one."""
        headers = {"Cookie": person.cookie, "HX-Request": "true"}
        r = await self._call("watch", self.client.get(page.url(), headers))
        if r is None:
            page.fails += 1
            return min(60.0, 2.0**page.fails)
        if r.status_code in (429, 503):
            return float(r.headers.get("retry-after") or 10)
        if r.status_code >= 400:
            return 10.0
        page.fails = 0
        if mark := r.headers.get("x-watch-mark"):
            page.mark = int(mark)
        if r.status_code == 200:
            self.tally.finished_seen.update(page.take(r.text))
        return float(r.headers.get("x-poll-in") or IDLE)

    async def watcher(self, person: Person) -> None:
        page = self.pages[person.id]
        await asyncio.sleep(IDLE * (person.id % 97) / 97)  # pages opened over a few seconds
        # Ends on `stop`, not only on cancel: Python 3.11's wait_for can swallow a cancellation
        # that arrives as its request completes, and one watcher polling on for ever kept the
        # client (and the drill) from finishing.
        while not self.stop.is_set():
            wait = await self.watch_once(person, page)
            await asyncio.sleep(wait)

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
        if r is None or r.status_code >= 400:
            return
        result = next(iter((r.json().get("data") or {}).values()), None) or {}
        if result.get("__typename") == "Task":
            task_id = int(result["id"])
            self.tally.accepted.append(task_id)
            self.tally.kinds[task_id] = kind
        elif result.get("__typename") == "TaskConflict":
            self.tally.attached += 1
        else:
            self._error("create", r.text[:300])

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

    async def _pages_settled(self, grace: float) -> None:
        """Until no page shows an unfinished row (or `grace` runs out): the last tasks' rows."""
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not any(p.rows for p in self.pages.values()):
                return
            await asyncio.sleep(0.5)

    async def run(self) -> dict[str, Any]:
        watchers = [asyncio.create_task(self.watcher(p)) for p in self.people]
        began = time.monotonic()
        try:  # an overloaded server must not keep the drill waiting for ever
            await asyncio.wait_for(self.creator(), self.args.seconds + self.args.grace)
        except TimeoutError:
            self._error("create", "not answered by the end of the grace period")
        await asyncio.sleep(max(0.0, self.args.seconds - (time.monotonic() - began)))
        took = time.monotonic() - began
        counts = {k: sum(v.values()) for k, v in self.tally.statuses.items()}  # in the window
        await self._pages_settled(self.args.grace)  # let the pages see the last tasks finish
        elapsed = time.monotonic() - began
        self.stop.set()
        for w in watchers:
            w.cancel()
        await asyncio.wait(watchers, timeout=IDLE * 12)
        await self.client.aclose()
        t = self.tally
        return {
            "seconds": took,
            "elapsed": elapsed,
            "people": len(self.people),
            "window_requests": counts,
            "latency": t.latency,
            "statuses": {k: {str(s): n for s, n in v.items()} for k, v in t.statuses.items()},
            "errors": t.errors,
            "body_bytes": dict(t.body_bytes),
            "first_error": t.first_error,
            "error_kinds": dict(t.error_kinds.most_common(10)),
            "accepted": t.accepted,
            "kinds": t.kinds,
            "attached": t.attached,
            "finished_seen": len(set(t.accepted) & t.finished_seen),
            "timeline": t.timeline,
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
    p.add_argument("--timeline", action="store_true", help="keep every request's time and answer")
    args = p.parse_args()
    with open(args.people) as f:
        people = [Person(**d) for d in json.load(f)]
    result = asyncio.run(Sim(args.base, people, args).run())
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
