"""The console's live blocks, pushed rather than polled: `GET /ops/live` is a server-sent event
stream that tells a console page when its live block changed (docs/architecture.md, "Change
feed").

The stream carries no data, only `changed`: the page then GETs its block as it always could,
through the same route, access check and in-flight bound as any fragment ("Overload"), so the
stream cannot show anything the page would not. Who may open it is settled by `ConsoleRoute`
exactly as for every console page ("Visibility"): anyone outside the console, and a team admin
asking for another team's task, gets the unknown address's 404.

One stream follows the process's change feed for the scope it opened with (an operator:
everything; a team admin: their teams and themselves). Changes are coalesced: at most one push a
second, so a burst of a thousand task changes costs a page one re-read a second, not a thousand.
A comment every 15 s keeps proxies from closing a quiet stream. The person's access is read
again whenever the feed says their session, membership or account changed, on every `Resync`
(notices may have been missed) and with every heartbeat (the operator role is not announced);
once refused, or once their scope differs from the one the stream serves, the stream ends — the
page's reconnect then gets the 404, or a stream for the new scope.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated

import anyio
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.types import Send

from desk.console import overview as console
from desk.core.errors import NotFound
from desk.core.feed import Event, LanesNote, Resync, TaskNote, TeamNote, UserNote
from desk.core.runtime import Runtime
from desk.people import operators, sessions
from desk.people.operators import Scope
from ui.console.route import ConsoleDep, ConsoleRoute
from web.auth import RuntimeDep, session_secret
from web.errors import DATABASE_DOWN

router = APIRouter(route_class=ConsoleRoute)

HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
RETRY_MS = 5000  # how long a browser waits before it reconnects a stream that ended
# The first bytes: the browser's reconnect delay, and `ready`, by which the page knows the
# stream flows (a proxy that buffers it delivers nothing, and the page polls instead).
READY = f"retry: {RETRY_MS}\nevent: ready\ndata: \n\n".encode()
CHANGED = b"event: changed\ndata: \n\n"
BEAT = b": beat\n\n"
PERSONAL = ("session", "membership", "person")  # a person's notes that may change their access


@dataclass(frozen=True)
class Watch:
    """What one live block shows, so which events are news to it: the scope's tasks (one task
    on a task's page; one team or kind when the list is filtered so), teams and lanes."""

    scope: Scope
    task: int | None = None
    team: int | None = None
    kind: str = ""

    def news(self, event: Event) -> bool:
        if isinstance(event, TaskNote):
            if self.task is not None:
                return event.id == self.task
            if event.gone:  # a pruned task names no team: only a view of every team minds
                return self.scope.operator and self.team is None
            return (
                self.scope.covers(event.team_id)
                and self.team in (None, event.team_id)
                and self.kind in ("", event.kind)
            )
        if isinstance(event, TeamNote):
            return self.scope.covers(event.team_id)
        return isinstance(event, (LanesNote, Resync))

    def personal(self, event: Event) -> bool:
        """Whether the person's access must be read again before anything else."""
        if isinstance(event, UserNote):
            return event.user_id == self.scope.user_id and event.what in PERSONAL
        return isinstance(event, Resync)


@contextlib.asynccontextmanager
async def _events(rt: Runtime, scope: Scope) -> AsyncIterator[asyncio.Queue[Event]]:
    """The queue the feed fills for this scope (operators: everything, see docs/architecture.md,
    "Visibility"); an empty one in a process without a feed, where only heartbeats come."""
    if rt.feed is None:
        yield asyncio.Queue()
        return
    if scope.operator:
        sub = rt.feed.subscribe(everything=True)
    else:
        sub = rt.feed.subscribe(teams=scope.team_ids, users=[scope.user_id])
    async with sub:
        yield sub.queue


async def _next(queue: asyncio.Queue[Event], within: float) -> Event | None:
    """The next event, or None when none came `within` seconds."""
    if not queue.empty():
        return queue.get_nowait()
    try:
        async with asyncio.timeout(within):
            return await queue.get()
    except TimeoutError:
        return None


class Stream:
    """One page's stream. Ends when the client goes (Starlette cancels it) or its access does."""

    SETTLE = 0.25  # s: changes come in clusters (claim, progress, finish): one push for a cluster
    DEBOUNCE = 1.0  # s: at least this long between two pushes
    HEARTBEAT = 15.0  # s: a comment on a quiet stream, and access read again

    def __init__(self, rt: Runtime, request: Request, watch: Watch) -> None:
        self.rt, self.request, self.watch = rt, request, watch
        self.pending: float | None = None  # when the oldest news not yet pushed came
        self.pushed_at = float("-inf")
        self.beat_at = 0.0

    def _push_at(self) -> float | None:
        if self.pending is None:
            return None
        return max(self.pending + self.SETTLE, self.pushed_at + self.DEBOUNCE)

    async def run(self) -> AsyncGenerator[bytes, None]:
        clock = asyncio.get_running_loop().time
        async with _events(self.rt, self.watch.scope) as queue:
            yield READY  # once subscribed: what changes from here on is pushed
            self.beat_at = clock() + self.HEARTBEAT
            while True:
                push_at = self._push_at()
                now = clock()
                due = self.beat_at if push_at is None else min(self.beat_at, push_at)
                if now < due:
                    event = await _next(queue, due - now)
                    if event is not None and not await self._take(event, clock):
                        return
                elif push_at is not None and now >= push_at:
                    self.pending, self.pushed_at, self.beat_at = None, now, now + self.HEARTBEAT
                    yield CHANGED
                else:
                    if not await self.allowed():
                        return
                    self.beat_at = now + self.HEARTBEAT
                    yield BEAT

    async def _take(self, event: Event, clock: Callable[[], float]) -> bool:
        """Note one event; False when it ended the person's access."""
        if self.watch.personal(event) and not await self.allowed():
            return False
        if self.pending is None and self.watch.news(event):
            self.pending = clock()
        return True

    async def allowed(self) -> bool:
        """Whether this stream's person may still see it: their session lives (read again, not
        the request's cached one) and their console scope is still the one it serves."""
        scope = self.watch.scope
        secret = session_secret(self.rt, self.request)
        try:
            found = await sessions.lookup(self.rt, secret) if secret else None
            if found is None or found.user_id != scope.user_id:
                return False
            return await operators.scope_of(self.rt, scope.user_id) == scope
        except NotFound:
            return False
        except DATABASE_DOWN:
            return False  # the page reconnects when it can, and is asked again then


class EventStream(StreamingResponse):
    """A stream's answer that closes its generator however the answer ends: a client that went
    away while a chunk was being sent would otherwise leave its feed subscription to the
    garbage collector."""

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        super().__init__(events, media_type="text/event-stream", headers=HEADERS)
        self.events = events

    async def stream_response(self, send: Send) -> None:
        try:
            await super().stream_response(send)
        finally:
            with anyio.CancelScope(shield=True):  # Starlette cancels the stream's task group
                await self.events.aclose()


@router.get("/ops/live")
async def live(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    task: Annotated[int | None, Query(ge=1)] = None,
    team: Annotated[int | None, Query(ge=1)] = None,
    kind: str = "",
) -> Response:
    """The stream of one live block: the overview, lists and pages of the whole scope by
    default; `task` for a task's page; `team`, `kind` for a list filtered so."""
    if task is not None:
        await console.task_in_scope(rt, c.scope, task)  # NotFound: as an unknown address
    return EventStream(Stream(rt, request, Watch(c.scope, task, team, kind)).run())
