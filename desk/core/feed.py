"""The change feed (docs/architecture.md, "Change feed"): one listening connection per web
process, and the fan-out of its notices to in-process subscribers.

At commit, triggers announce what changed with `NOTIFY taskdesk_feed` (migration 0011): ids and
versions, never business data. `Feed` holds ONE direct connection that LISTENs (not a pooled
one: a transaction pooler would not keep a LISTEN; `FEED_DATABASE_URL` names it), parses each
notice once and hands its parts to the subscriptions that asked for them, each through a bounded
queue, and to the process's observers (the page watcher's memory) synchronously.

The ledger stays the truth. A subscription whose queue overflows, and every subscription when the
listener reconnects, gets `Resync`: re-read what you show. Observers get `reset()` whenever the
listener is not known to have seen every notice (before the first LISTEN, on a lost connection),
and may trust what they remember only while `connected`; so a missed notice delays news, never
loses it or shows something wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import psycopg

CHANNEL = "taskdesk_feed"
log = logging.getLogger("taskdesk.feed")

UserWhat = Literal["notification", "session", "membership", "person"]


def _time(us: str) -> datetime | None:
    return datetime.fromtimestamp(int(us) / 1_000_000, UTC) if us else None


@dataclass(frozen=True, slots=True)
class TaskNote:
    """One task row as its commit left it: what a label and a version are made of (a TaskLike)."""

    id: int
    team_id: int
    owner_id: int
    kind: str
    status: str
    updated_us: int  # `updated_at` in µs since the epoch (a version; ui.watch.polling counts so)
    run_at: datetime
    lease_until: datetime | None
    expires_at: datetime | None
    cancel_requested: bool
    attempts: int
    result_skipped: bool
    result_bytes: int | None
    created: bool = False
    gone: bool = False

    @property
    def updated_at(self) -> datetime:
        return datetime.fromtimestamp(self.updated_us / 1_000_000, UTC)

    @classmethod
    def parse(cls, item: str) -> TaskNote:
        f = item.split(",")
        return cls(
            int(f[0]),
            int(f[1] or 0),  # an EMAIL task may have no team or owner: 0, nobody's
            int(f[2] or 0),
            f[3],
            f[4],
            int(f[5]),
            _time(f[6]) or datetime.fromtimestamp(0, UTC),
            _time(f[7]),
            _time(f[8]),
            f[9] == "1",
            int(f[10]),
            f[11] == "1",
            int(f[12]) if f[12] else None,
            f[13] == "1",
        )

    @classmethod
    def deleted(cls, task_id: int) -> TaskNote:
        epoch = datetime.fromtimestamp(0, UTC)
        return cls(task_id, 0, 0, "", "", 0, epoch, None, None, False, 0, False, None, gone=True)


@dataclass(frozen=True, slots=True)
class UserNote:
    """Something of one person changed: their notifications, a session ended, a membership
    (`team_id` says which), or their account."""

    user_id: int
    what: UserWhat
    team_id: int | None = None


@dataclass(frozen=True, slots=True)
class TeamNote:
    """A team was renamed or removed."""

    team_id: int


@dataclass(frozen=True, slots=True)
class ThreadNote:
    """A ticket's conversation, history or fields changed (migration 0018): re-read what you
    show of it. Only subscriptions that name the ticket (`tickets=`) get it."""

    ticket_id: int


@dataclass(frozen=True, slots=True)
class LanesNote:
    """A lane was paused or resumed."""


@dataclass(frozen=True, slots=True)
class Resync:
    """Notices may have been missed (the listener reconnected, or this subscription fell
    behind): re-read what you show from the database."""

    reason: str


Event = TaskNote | UserNote | TeamNote | ThreadNote | LanesNote | Resync
_USER_PARTS: dict[str, UserWhat] = {"n": "notification", "s": "session", "u": "person"}


def parse(payload: str) -> list[Event]:
    """A notice's events (see migration 0011 for the format); an unknown one is ignored."""
    prefix, _, body = payload.partition(":")
    items = [i for i in body.split(";") if i]
    if prefix == "t":
        return [TaskNote.parse(i) for i in items]
    if prefix == "d":
        return [TaskNote.deleted(int(i)) for i in items]
    if prefix in _USER_PARTS:
        return [UserNote(int(i), _USER_PARTS[prefix]) for i in items]
    if prefix == "m":
        pairs = (i.split(".") for i in items)
        return [UserNote(int(u), "membership", int(t)) for t, u in pairs]
    if prefix == "g":
        return [TeamNote(int(i)) for i in items]
    if prefix == "l":
        return [LanesNote()]
    if prefix == "k":
        return [ThreadNote(int(i)) for i in items]
    return []


class Observer(Protocol):
    """Told every event synchronously, in commit order, before any subscription."""

    def reset(self) -> None: ...

    def events(self, events: list[Event]) -> None: ...


class Subscription:
    """What one subscriber asked for, and its bounded queue. `async with` registers it,
    `async for` yields its events."""

    def __init__(
        self,
        feed: Feed,
        tasks: Iterable[int],
        teams: Iterable[int],
        users: Iterable[int],
        everything: bool,
        size: int,
        tickets: Iterable[int] = (),
    ) -> None:
        self.feed = feed
        self.tasks = frozenset(tasks)
        self.tickets = frozenset(tickets)
        self.teams = frozenset(teams)
        self.users = frozenset(users)
        self.everything = everything
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize=size)
        self.overflows = 0

    def put(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            # Behind: what is queued is worth less than one re-read.
            self.overflows += 1
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(Resync("overflow"))

    def interests(self) -> list[tuple[str, int]]:
        return (
            [("task", i) for i in self.tasks]
            + [("team", i) for i in self.teams]
            + [("user", i) for i in self.users]
            + [("ticket", i) for i in self.tickets]
            + ([("all", 0)] if self.everything else [])
        )

    async def __aenter__(self) -> Subscription:
        self.feed._add(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.feed._remove(self)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        return await self.queue.get()


class Feed:
    """The process's listener; `start()` it once, `close()` at exit."""

    HEALTH_CHECK = 15.0  # seconds without a notice before the connection is asked if it lives
    BACKOFF = (0.05, 0.2, 0.5, 1.0, 2.0)

    def __init__(self, url: str, *, application_name: str = "taskdesk-feed") -> None:
        self.url = url
        self.application_name = application_name
        self.subscriptions: set[Subscription] = set()
        # Who wants what, by key: a notice costs the subscriptions it names, not all of them.
        self._by_key: dict[tuple[str, int], set[Subscription]] = {}
        self.observers: list[Observer] = []
        self.connected = False
        self.generation = 0  # counts LISTENs: what was learnt under an older one is stale
        self.baseline = 0  # the newest task id when this LISTEN began (see `_listen`)
        self.notices = 0
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Condition()  # told at every LISTEN
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._syncs: dict[str, asyncio.Event] = {}

    def subscribe(
        self,
        *,
        tasks: Iterable[int] = (),
        teams: Iterable[int] = (),
        users: Iterable[int] = (),
        everything: bool = False,
        size: int = 256,
        tickets: Iterable[int] = (),
    ) -> Subscription:
        return Subscription(self, tasks, teams, users, everything, size, tickets)

    def observe(self, observer: Observer) -> None:
        self.observers.append(observer)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="taskdesk-feed")

    async def wait_connected(self, seconds: float, after: int = 0) -> bool:
        """For start-up and tests: whether the listener is connected within `seconds`, by a
        LISTEN newer than generation `after` (a reconnect, when given the present one)."""

        def listening() -> bool:
            return self.connected and self.generation > after

        async with self._listening:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._listening.wait_for(listening), seconds)
        return listening()

    async def sync(self, seconds: float = 30.0) -> bool:
        """Whether every commit made before this call has been told to the observers and
        subscriptions (within `seconds`). Notices arrive in commit order, so a marker notified
        now arrives after all of theirs. For tests and tools: what a user waits for by the next
        tick."""
        if not await self.wait_connected(seconds):
            return False
        token = secrets.token_hex(8)
        done = self._syncs[token] = asyncio.Event()
        try:
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, "x:" + token))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), seconds)
            return done.is_set()
        finally:
            self._syncs.pop(token, None)

    def _synced(self, token: str) -> None:
        waiter = self._syncs.get(token)
        if waiter is not None:
            waiter.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._lost()

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                await self._listen()
            except (psycopg.Error, OSError) as exc:
                if self.connected or failures == 0:
                    log.warning("change feed: listening connection lost (%s); reconnecting", exc)
                self._lost()
                await asyncio.sleep(self.BACKOFF[min(failures, len(self.BACKOFF) - 1)])
                failures += 1
                continue
            failures = 0

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(
            self.url, autocommit=True, application_name=self.application_name
        )
        self._conn = conn
        try:
            await conn.execute(f"LISTEN {CHANNEL}")
            # Every commit from here on is announced to us; every task committed before this
            # read has an id <= baseline. So a task id above it that no notice named does not
            # exist — what lets the watcher say "nothing newer" without asking (desk/reads/memory.py).
            cur = await conn.execute("SELECT coalesce(max(id), 0) FROM background_task")
            row = await cur.fetchone()
            self.baseline = int(row[0]) if row else 0
            self.generation += 1
            for o in self.observers:
                o.reset()
            self.connected = True
            async with self._listening:
                self._listening.notify_all()
            self._fan_out([Resync("reconnected" if self.generation > 1 else "started")])
            while True:
                async for n in conn.notifies(timeout=self.HEALTH_CHECK):
                    if n.payload.startswith("x:"):
                        self._synced(n.payload[2:])
                        continue
                    self.notices += 1
                    self._fan_out(parse(n.payload))
                await conn.execute("SELECT 1")  # quiet for a while: is the connection alive?
        finally:
            self._conn = None
            with contextlib.suppress(Exception):
                await conn.close()

    def _lost(self) -> None:
        self.connected = False
        for o in self.observers:
            o.reset()

    def _add(self, sub: Subscription) -> None:
        self.subscriptions.add(sub)
        for key in sub.interests():
            self._by_key.setdefault(key, set()).add(sub)

    def _remove(self, sub: Subscription) -> None:
        self.subscriptions.discard(sub)
        for key in sub.interests():
            subs = self._by_key.get(key)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._by_key[key]

    def _wanting(self, event: Event) -> set[Subscription]:
        if isinstance(event, Resync | LanesNote):  # rare, and a pause concerns every reader
            return set(self.subscriptions)
        if isinstance(event, ThreadNote):  # a ticket's readers only: not the console's streams
            return set(self._by_key.get(("ticket", event.ticket_id), set()))
        keys: list[tuple[str, int]] = [("all", 0)]
        if isinstance(event, TaskNote):
            keys += [("task", event.id), ("team", event.team_id)]
        elif isinstance(event, UserNote):
            keys.append(("user", event.user_id))
        elif isinstance(event, TeamNote):
            keys.append(("team", event.team_id))
        found: set[Subscription] = set()
        for key in keys:
            found |= self._by_key.get(key, set())
        return found

    def _fan_out(self, events: list[Event]) -> None:
        if not events:
            return
        for o in self.observers:
            o.events(events)
        if not self.subscriptions:
            return
        for e in events:
            for sub in self._wanting(e):
                sub.put(e)

    @property
    def backend_pid(self) -> int | None:
        """The listening connection's server process (tests end it with pg_terminate_backend)."""
        return self._conn.info.backend_pid if self._conn is not None else None
