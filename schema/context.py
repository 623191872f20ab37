"""Per-request GraphQL context: the runtime, who is calling, the request id, the DataLoaders, the
request's database slots and its response budget.

Identification happens once per request, by the `identify` function the app hands to
`schema.app.graphql_router` (web/auth.py: session cookie or bearer token); a bad or missing
credential is remembered and raised as `UNAUTHENTICATED` only by fields that need a user, so one
error shape covers both. Loaders are created on first use: the hot `task(id)` read
never pays for them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from starlette.requests import HTTPConnection
from strawberry.dataloader import DataLoader
from strawberry.types import Info

from desk.core.errors import DeskError, Unauthenticated
from desk.core.models import BackgroundTask, Ticket
from desk.core.runtime import Runtime
from desk.helpdesk import tickets
from desk.helpdesk.thread import Change, Page
from desk.reads import lookups
from desk.reads import tasks as reads
from desk.reads import threads as thread_reads
from desk.work import reminders
from schema.errors import fail, too_large

log = logging.getLogger("taskdesk.graphql")


class Caller(Protocol):
    """Who is calling, as the app's `identify` reports it."""

    @property
    def user_id(self) -> int: ...

    @property
    def session(self) -> str | None:
        """The session an accept must check in its own statement (named from memory), or None."""


class Identify(Protocol):
    """(runtime, request) -> the caller, None when anonymous; raises Unauthenticated for a bad
    token. With `task_id` it may read that task with the session (`caller.task`, a TaskHit);
    `accepting`: the operation is an accept, which checks a session named from memory again in
    its own statement (`caller.session`)."""

    def __call__(
        self,
        rt: Runtime,
        conn: HTTPConnection,
        task_id: int | None = None,
        *,
        accepting: bool = False,
    ) -> Awaitable[Caller | None]: ...


Member = tuple[int, str, str, str]  # user id, display name, email, role (tickets.team_members)
# A thread page asked of a ticket: ticket id, size, after, before, from the end (`last`).
ThreadKey = tuple[int, int, int | None, int | None, bool]
HistoryKey = tuple[int, int, int | None]  # ticket id, first, after


@dataclass
class Loaders:
    """Batch lookups for one request, so a page costs one statement per relation, not per row.
    Each batch runs on its own connection, inside the request's connection slots."""

    users: DataLoader[int, lookups.UserName | None]
    tickets: DataLoader[int, Ticket | None]
    teams: DataLoader[int, lookups.TeamView | None]
    reminders: DataLoader[int, BackgroundTask | None]  # a ticket's pending reminder
    members: DataLoader[int, list[Member]]  # a team's members as the caller may see them
    threads: DataLoader[ThreadKey, thread_reads.Window | None]  # None: not the caller's to see
    histories: DataLoader[HistoryKey, Page[Change] | None]


def _loaders(ctx: Context, user_id: int) -> Loaders:
    rt = ctx.rt

    async def users(ids: list[int]) -> list[lookups.UserName | None]:
        async with ctx.slot():
            found = await lookups.users_by_id(rt, ids)
        return [found.get(i) for i in ids]

    async def tickets_(ids: list[int]) -> list[Ticket | None]:
        async with ctx.slot():
            found = await lookups.visible_tickets(rt, user_id, ids)
        return [found.get(i) for i in ids]

    async def teams(ids: list[int]) -> list[lookups.TeamView | None]:
        async with ctx.slot():
            found = await lookups.member_teams(rt, user_id, ids)
        return [found.get(i) for i in ids]

    async def reminders_(ids: list[int]) -> list[BackgroundTask | None]:
        async with ctx.slot():
            found = await reminders.pending_reminders(rt, user_id, ids)
        return [found.get(i) for i in ids]

    async def members(ids: list[int]) -> list[list[Member]]:
        out: list[list[Member]] = []
        async with ctx.slot():
            for team_id in ids:  # distinct teams on a page: almost always one
                try:
                    out.append(await tickets.team_members(rt, user_id, team_id))
                except DeskError:
                    out.append([])
        return out

    async def threads_(keys: list[ThreadKey]) -> list[thread_reads.Window | None]:
        found: dict[ThreadKey, thread_reads.Window | None] = {}
        for (first, after, before, latest), ids in _by_page(keys).items():
            async with ctx.slot():  # one batch per distinct page asked: almost always one
                got = await thread_reads.windows(
                    rt, user_id, ids, first=first, after=after, before=before, latest=latest
                )
            found |= {(t, first, after, before, latest): got.get(t) for t in ids}
        return [found[k] for k in keys]

    async def histories(keys: list[HistoryKey]) -> list[Page[Change] | None]:
        found: dict[HistoryKey, Page[Change] | None] = {}
        for (first, after), ids in _by_page(keys).items():
            async with ctx.slot():
                got = await thread_reads.histories(rt, user_id, ids, first=first, after=after)
            found |= {(t, first, after): got.get(t) for t in ids}
        return [found[k] for k in keys]

    return Loaders(
        DataLoader(users),
        DataLoader(tickets_),
        DataLoader(teams),
        DataLoader(reminders_),
        DataLoader(members),
        DataLoader(threads_),
        DataLoader(histories),
    )


def _by_page(keys: list[tuple[Any, ...]]) -> dict[tuple[Any, ...], list[int]]:
    """Loader keys (ticket id, then the page asked) grouped by the page: ticket ids per page."""
    out: dict[tuple[Any, ...], list[int]] = {}
    for ticket_id, *page in keys:
        ids = out.setdefault(tuple(page), [])
        if ticket_id not in ids:
            ids.append(ticket_id)
    return out


@dataclass
class Context:
    rt: Runtime
    request: HTTPConnection | None
    request_id: str
    caller: Caller | None = None
    auth_error: Unauthenticated | None = None
    tasks_read: dict[int, reads.TaskHit] = field(default_factory=dict)  # read with the caller
    _loaders: Loaders | None = field(default=None, repr=False)
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)
    _spent: int = field(default=0, repr=False)

    @property
    def user_id(self) -> int:
        """The caller's id; fields that need a user read it and so refuse the anonymous."""
        if self.caller is None:
            fail(self.auth_error or Unauthenticated())
        return self.caller.user_id

    @property
    def session(self) -> str | None:
        """The session an accept checks in its own statement (its caller was named from
        memory), else None."""
        return self.caller.session if self.caller is not None else None

    @property
    def loaders(self) -> Loaders:
        if self._loaders is None:
            self._loaders = _loaders(self, self.user_id)
        return self._loaders

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of this request's database slots: however many aliases and fields a query
        has, one request uses at most GRAPHQL_REQUEST_CONNECTIONS connections at a time, so the
        pool stays open to everybody else."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.rt.settings.graphql_request_connections)
        async with self._slots:
            yield

    def spend(self, size: int) -> None:
        """Count ticket text (characters) into this response; refuse once it passes
        GRAPHQL_MAX_RESPONSE_BYTES, before more rows are read (aliases multiply a list)."""
        self._spent += size
        limit = self.rt.settings.graphql_max_response_bytes
        if self._spent > limit:
            raise too_large(limit)

    def now(self) -> datetime:
        return self.rt.clock()


async def build_context(
    rt: Runtime,
    request: HTTPConnection,
    request_id: str,
    identify: Identify,
    task_id: int | None = None,
    *,
    accepting: bool = False,
) -> Context:
    """`task_id`: the operation is a status read of that task (`schema.app.status_read`): the
    caller and the task are read together, and `task(id)` uses that read. `accepting`: the
    operation is a lone accept (`schema.executor.Runner.accepting`)."""
    ctx = Context(rt=rt, request=request, request_id=request_id)
    try:
        if task_id:
            ctx.caller = await identify(rt, request, task_id)
        else:
            ctx.caller = await identify(rt, request, accepting=accepting)
    except Unauthenticated as exc:
        ctx.auth_error = exc
    hit = getattr(ctx.caller, "task", None)
    if task_id is not None and isinstance(hit, reads.TaskHit):
        ctx.tasks_read[task_id] = hit
    return ctx


def ctx_of(info: Info) -> Context:
    return info.context  # type: ignore[no-any-return]
