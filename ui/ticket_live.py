"""An open ticket page, told when its thread changed: `GET /tickets/{id}/live` is a server-sent
event stream in the pattern of the console's (ui/console/live.py; docs/architecture.md,
"Change feed" and "Conversation").

The stream carries no data, only `changed`: the page then GETs what is newer than it shows
(`/tickets/{id}/thread?after=…`, ui/thread_routes.py) through the ordinary route, access check
and in-flight bound, so the stream cannot show what the page would not — a customer's page is
woken by a note's notice and reads nothing new. It follows the ticket's `ThreadNote`s (messages,
history, fields), the viewer's own notices and, for staff, the EMAIL tasks of the newest window's
messages (their delivery state). Changes are coalesced: a push at most every DEBOUNCE seconds.

Who may open it is who may see the ticket: anyone else gets the 404 a missing ticket gets. Their
access is read again on every `Resync`, whenever the feed says their session, membership or
account changed, and with every heartbeat; once refused, the stream ends and the browser's
reconnect gets the 404.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterable
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from desk.core import inputs
from desk.core.errors import NotFound
from desk.core.feed import Event, Resync, Subscription, TaskNote, ThreadNote, UserNote
from desk.core.runtime import Runtime
from desk.people import sessions
from desk.reads import conversation
from ui.console.live import BEAT, CHANGED, READY, EventStream
from ui.route import UiRoute
from ui.thread_view import WINDOW
from ui.viewer import FragmentViewer
from web.auth import RuntimeDep, session_secret
from web.errors import DATABASE_DOWN

router = APIRouter(route_class=UiRoute)
PERSONAL = ("session", "membership", "person")  # a person's notes that may change their access


class Listening:
    """The stream's feed subscription: the ticket, the viewer and some EMAIL tasks. Following
    other tasks is a new subscription, entered before the old one is left, so no notice falls
    between them."""

    def __init__(self, rt: Runtime, ticket_id: int, user_id: int) -> None:
        self.rt, self.ticket_id, self.user_id = rt, ticket_id, user_id
        self.tasks: frozenset[int] = frozenset()
        self.sub: Subscription | None = None
        self.queue: asyncio.Queue[Event] = asyncio.Queue()  # stays empty without a feed

    async def follow(self, tasks: Iterable[int]) -> None:
        wanted = frozenset(tasks)
        if self.rt.feed is None or (self.sub is not None and wanted == self.tasks):
            return
        self.tasks = wanted
        sub = self.rt.feed.subscribe(tickets=[self.ticket_id], users=[self.user_id], tasks=wanted)
        await sub.__aenter__()
        old, self.sub, self.queue = self.sub, sub, sub.queue
        if old is not None:
            if not old.queue.empty():  # what the old one held unread is news
                self.queue.put_nowait(Resync("resubscribed"))
            await old.__aexit__(None, None, None)

    async def close(self) -> None:
        if self.sub is not None:
            await self.sub.__aexit__(None, None, None)
            self.sub = None

    def news(self, event: Event) -> bool:
        if isinstance(event, ThreadNote):
            return event.ticket_id == self.ticket_id
        if isinstance(event, TaskNote):
            return event.id in self.tasks
        return isinstance(event, Resync)

    def personal(self, event: Event) -> bool:
        if isinstance(event, UserNote):
            return event.user_id == self.user_id and event.what in PERSONAL
        return isinstance(event, Resync)


async def _next(queue: asyncio.Queue[Event], within: float) -> Event | None:
    if not queue.empty():
        return queue.get_nowait()
    try:
        async with asyncio.timeout(within):
            return await queue.get()
    except TimeoutError:
        return None


class Stream:
    """One page's stream. Ends when the client goes (Starlette cancels it) or its access does."""

    SETTLE = 0.05  # s: a post's notices (message, history, e-mails) come together: one push
    DEBOUNCE = 0.25  # s: at least this long between two pushes (at most four a second)
    HEARTBEAT = 15.0  # s: a comment on a quiet stream, and access read again

    def __init__(self, rt: Runtime, request: Request, ticket_id: int, user_id: int) -> None:
        self.rt, self.request = rt, request
        self.ticket_id, self.user_id = ticket_id, user_id
        self.listening = Listening(rt, ticket_id, user_id)
        self.pending: float | None = None  # when the oldest news not yet pushed came
        self.grew = False  # a ThreadNote came: the window (and its e-mails) may have moved
        self.pushed_at = float("-inf")

    def _push_at(self) -> float | None:
        if self.pending is None:
            return None
        return max(self.pending + self.SETTLE, self.pushed_at + self.DEBOUNCE)

    async def run(self) -> AsyncGenerator[bytes, None]:
        clock = asyncio.get_running_loop().time
        try:
            if not await self.allowed():  # subscribed first: nothing falls between
                return
            yield READY
            beat_at = clock() + self.HEARTBEAT
            while True:
                push_at, now = self._push_at(), clock()
                due = beat_at if push_at is None else min(beat_at, push_at)
                if now < due:
                    event = await _next(self.listening.queue, due - now)
                    if event is not None and not await self._take(event, clock()):
                        return
                elif push_at is not None and now >= push_at:
                    self.pending, self.pushed_at, beat_at = None, now, now + self.HEARTBEAT
                    if self.grew and not await self.allowed():
                        return
                    yield CHANGED
                else:
                    if not await self.allowed():
                        return
                    beat_at = now + self.HEARTBEAT
                    yield BEAT
        finally:
            await self.listening.close()

    async def _take(self, event: Event, now: float) -> bool:
        """Note one event; False when it ended the person's access."""
        if self.listening.personal(event) and not await self.allowed():
            return False
        if self.listening.news(event):
            self.grew = self.grew or isinstance(event, ThreadNote | Resync)
            if self.pending is None:
                self.pending = now
        return True

    async def allowed(self) -> bool:
        """Whether the person may still see the ticket: their session lives (read again, not
        the request's) and the thread reads for them; the EMAIL tasks to follow come with it."""
        secret = session_secret(self.rt, self.request)
        try:
            found = await sessions.lookup(self.rt, secret) if secret else None
            if found is None or found.user_id != self.user_id:
                return False
            await self.listening.follow(await self._tasks())
        except NotFound:
            return False
        except DATABASE_DOWN:
            return False  # the page reconnects when it can, and is asked again then
        self.grew = False
        return True

    async def _tasks(self) -> set[int]:
        """The EMAIL tasks of the newest window's messages still on their way (staff only see
        deliveries, so a customer's set is empty); NotFound when the ticket is not theirs."""
        view = await conversation.read_thread(self.rt, self.user_id, self.ticket_id, first=WINDOW)
        return {
            d.task_id
            for found in view.deliveries.values()
            for d in found
            if d.state in ("sending", "retrying", "failed")
        }


@contextlib.asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield


@router.get("/tickets/{ticket_id}/live")
async def live(
    request: Request,
    ticket_id: Annotated[int, Path(ge=1, le=inputs.MAX_INT4)],
    rt: RuntimeDep,
    v: FragmentViewer,
) -> Response:
    """The ticket page's stream; a ticket the viewer may not see is the missing one's 404."""
    await conversation.read_thread(rt, v.user_id, ticket_id, first=1)  # NotFound: the 404
    return EventStream(Stream(rt, request, ticket_id, v.user_id).run())
