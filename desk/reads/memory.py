"""A web process's memory of the change feed (docs/architecture.md, "Change feed"): what the page
watcher's tick needs to tell "nothing changed" without a statement.

It remembers, per process: task rows (as their notices or the tick's reads left them: what a
version and a label are made of), live sessions and the people behind them (also who a session
is, for the accepts that name their caller without a statement: `caller`), unread counts, the
team roles the ticks used, the lanes' pauses, and the tasks created since the listener began.
Notices (desk/core/feed.py) replace or drop entries as they commit; the tick's own reads fill in
what no notice has told yet, guarded so a read that raced a notice never stores an older answer
than the notice's (`begin`/`learn_*`).

Every answer is "known" or "ask the database" (None): nothing is trusted while the listener is
not connected, and everything is forgotten when it reconnects (`reset`). So a notice missed,
late or forgotten (the bounds) costs one statement, never a wrong 204. Across web processes it is
right for the same reason: each process's listener sees every commit.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from desk.core.clock import micros
from desk.core.feed import Event, Feed, LanesNote, Resync, TaskNote, TeamNote, UserNote
from desk.core.models import Role, TaskKind
from desk.core.rows import TaskRow
from desk.people import access
from desk.reads.tasks import Person, TeamRef

REMINDER = str(TaskKind.REMINDER)

MAX_ROWS = 200_000
MAX_SESSIONS = 100_000
MAX_CREATED_PER_TEAM = 2_000
MAX_WHOLE = 10_000  # whole rows (a few kB each): the rows pages watch now, not history


@dataclass(frozen=True, slots=True)
class SessionMemo:
    """A live session as the tick read it (`desk.reads.tick`): valid until `expires_at` unless a
    notice about its person comes first."""

    user_id: int
    person: Person
    csrf: str
    expires_at: datetime
    teams: tuple[TeamRef, ...] | None  # read only when the page has no team cookie
    first_team: int | None  # the team a page without a team cookie works in (when `teams`)


def _title_shared(task: TaskRow, role: Role) -> bool:
    """Whether a reader of `role` is shown the row's ticket title as every such reader is: a
    reminder's title is staff's to see (`access.can_see_ticket`), a customer's only when theirs."""
    return task.kind != REMINDER or role.is_staff


@dataclass(frozen=True, slots=True)
class CallerMemo:
    """Who a live session is, as an identification read it (`web.auth`): valid until
    `expires_at` unless a notice about its person comes first. Only what names the caller; an
    accept checks the session again inside its own statement (desk/ledger/intake.py)."""

    user_id: int
    csrf: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Whole:
    """A task's whole row as a read left it, with what a row adds: the reminder's ticket title as
    staff see it. Good for exactly the version it was read at (`updated_us`)."""

    task: TaskRow
    updated_us: int
    title: str | None


@dataclass(frozen=True, slots=True)
class Reading:
    """A read in progress: what the memory had seen when it began."""

    seq: int
    generation: int


class Memory:
    """One per web process, fed by its `Feed` (an observer)."""

    def __init__(self, feed: Feed) -> None:
        self.feed = feed
        self.rows: OrderedDict[int, TaskNote] = OrderedDict()
        self.whole: OrderedDict[int, Whole] = OrderedDict()
        self.sessions: OrderedDict[str, SessionMemo] = OrderedDict()
        self.callers: OrderedDict[str, CallerMemo] = OrderedDict()
        self.by_user: dict[int, set[str]] = {}
        self.unread: dict[int, int] = {}
        self.roles: dict[tuple[int, int], Role] = {}
        self.paused: frozenset[str] | None = None
        self.created: dict[int, deque[TaskNote]] = {}
        self.floor = 0  # task ids above it that no notice named do not exist
        self._newest = 0  # the newest task id a notice named since (`horizon`)
        self.team_floor: dict[int, int] = {}  # ... per team, once its list was trimmed
        self.seq = 0
        self.generation = -1
        self._reads = 0
        self._touched: dict[tuple[str, int], int] = {}
        self._pending: dict[int, asyncio.Future[None]] = {}
        feed.observe(self)

    # --- what the feed tells -----------------------------------------------------------------

    def reset(self) -> None:
        self.rows.clear()
        self.whole.clear()
        self.sessions.clear()
        self.callers.clear()
        self.by_user.clear()
        self.unread.clear()
        self.roles.clear()
        self.paused = None
        self.created.clear()
        self.team_floor.clear()
        self.floor = self._newest = self.feed.baseline
        self.generation = self.feed.generation
        self.seq += 1
        self._touched.clear()

    def events(self, events: list[Event]) -> None:
        self.seq += 1
        for e in events:
            if isinstance(e, TaskNote):
                self._task(e)
            elif isinstance(e, UserNote):
                self._user(e)
            elif isinstance(e, TeamNote | Resync):
                self._forget_people()
            elif isinstance(e, LanesNote):
                self.paused = None
                self._touch("lanes", 0)

    def _touch(self, kind: str, key: int) -> None:
        if self._reads:  # only a read in flight needs to know what moved under it
            self._touched[(kind, key)] = self.seq

    def _task(self, note: TaskNote) -> None:
        self._touch("task", note.id)
        if note.gone:
            self.rows.pop(note.id, None)
            self.whole.pop(note.id, None)
            return
        self._keep_row(note)
        if note.created:
            self._newest = max(self._newest, note.id)
            made = self.created.setdefault(note.team_id, deque())
            made.append(note)
            if len(made) > MAX_CREATED_PER_TEAM:
                old = made.popleft()
                self.team_floor[note.team_id] = max(self.team_floor.get(note.team_id, 0), old.id)

    def _keep_row(self, note: TaskNote) -> None:
        self.rows[note.id] = note
        self.rows.move_to_end(note.id)
        if len(self.rows) > MAX_ROWS:
            self.rows.popitem(last=False)

    def _user(self, note: UserNote) -> None:
        self._touch("user", note.user_id)
        if note.what == "notification":
            self.unread.pop(note.user_id, None)
            return
        for digest in self.by_user.pop(note.user_id, set()):
            self.sessions.pop(digest, None)
            self.callers.pop(digest, None)
        self.roles = {k: v for k, v in self.roles.items() if k[0] != note.user_id}
        self.unread.pop(note.user_id, None)

    def _forget_people(self) -> None:
        self._touch("people", 0)
        self.sessions.clear()
        self.callers.clear()
        self.by_user.clear()
        self.roles.clear()

    # --- what a tick asks --------------------------------------------------------------------

    @property
    def trusted(self) -> bool:
        return self.feed.connected and self.generation == self.feed.generation

    def session(self, digest: str, now: datetime) -> SessionMemo | None:
        memo = self.sessions.get(digest) if self.trusted else None
        return memo if memo is not None and memo.expires_at > now else None

    def caller(self, digest: str, now: datetime) -> CallerMemo | None:
        """Who the live session `digest` is, from either kind of read; None: ask."""
        if not self.trusted:
            return None
        memo = self.callers.get(digest)
        tick = self.sessions.get(digest) if memo is None else None
        if tick is not None:
            memo = CallerMemo(tick.user_id, tick.csrf, tick.expires_at)
        return memo if memo is not None and memo.expires_at > now else None

    def row(self, task_id: int) -> TaskNote | None:
        return self.rows.get(task_id) if self.trusted else None

    def role(self, user_id: int, team_id: int) -> Role | None:
        return self.roles.get((user_id, team_id)) if self.trusted else None

    def unread_of(self, user_id: int) -> int | None:
        return self.unread.get(user_id) if self.trusted else None

    def lanes_paused(self) -> frozenset[str] | None:
        return self.paused if self.trusted else None

    def newer_notes(
        self, member: access.Member, after: int, kind: str | None, first: int
    ) -> list[TaskNote] | None:
        """The newest `first` tasks above id `after` the member may see (of `kind` when given),
        newest first, as they stand now; None when the memory cannot tell."""
        if not self.trusted or after < max(self.floor, self.team_floor.get(member.team_id, 0)):
            return None
        found: list[TaskNote] = []
        for made in reversed(self.created.get(member.team_id, ())):
            if made.id <= after or len(found) == first:
                break
            if (kind is None or made.kind == kind) and access.can_see_task(
                member, made.kind, made.owner_id
            ):
                now = self.rows.get(made.id)
                if now is None:  # deleted, or forgotten: the database knows
                    return None
                found.append(now)
        return found

    def whole_of(self, note: TaskNote, role: Role) -> Whole | None:
        """The whole row at the note's version, as `role` may be shown it (None: ask)."""
        hit = self.whole.get(note.id) if self.trusted else None
        if hit is None or hit.updated_us != note.updated_us or hit.task.status != note.status:
            return None
        return hit if _title_shared(hit.task, role) else None

    @property
    def horizon(self) -> int:
        """The newest task id the memory knows of (a page's list has been checked up to it):
        kept as notices come, not worked out over every team at every tick."""
        return max(self.floor, self._newest)

    # --- what a tick's read teaches ----------------------------------------------------------

    def begin(self) -> Reading:
        self._reads += 1
        return Reading(self.seq, self.generation)

    def end(self) -> None:
        self._reads -= 1
        if not self._reads:
            self._touched.clear()

    def _fresh(self, r: Reading, kind: str, key: int) -> bool:
        """Nothing about this key was told since the read began (so the read is not older)."""
        return (
            self.trusted
            and r.generation == self.generation
            and self._touched.get((kind, key), -1) <= r.seq
            and self._touched.get(("people", 0), -1) <= r.seq
        )

    def learn_session(self, r: Reading, digest: str, memo: SessionMemo, unread: int | None) -> None:
        if not self._fresh(r, "user", memo.user_id):
            return
        self._keep_session(self.sessions, self.callers, digest, memo)
        if unread is not None:
            self.unread[memo.user_id] = unread

    def learn_caller(self, r: Reading, digest: str, memo: CallerMemo) -> None:
        if not self._fresh(r, "user", memo.user_id):
            return
        self._keep_session(self.callers, self.sessions, digest, memo)

    def _keep_session(
        self, table: OrderedDict[str, Any], other: Mapping[str, Any], digest: str, memo: Any
    ) -> None:
        """Keep `memo` under `digest`, indexed by its person for the notices that drop it."""
        table[digest] = memo
        table.move_to_end(digest)
        self.by_user.setdefault(memo.user_id, set()).add(digest)
        if len(table) > MAX_SESSIONS:
            old, gone = table.popitem(last=False)
            if old not in other:  # still indexed for the notices that drop it from `other`
                self.by_user.get(gone.user_id, set()).discard(old)

    def learn_roles(self, r: Reading, user_id: int, roles: Iterable[tuple[int, Role]]) -> None:
        if self._fresh(r, "user", user_id):
            for team_id, role in roles:
                self.roles[(user_id, team_id)] = role

    def learn_row(self, r: Reading, note: TaskNote) -> None:
        if self._fresh(r, "task", note.id) and note.id not in self.rows:
            self._keep_row(note)

    def promise(self, ids: Iterable[int]) -> list[tuple[int, asyncio.Future[None]]]:
        """A read of these rows is under way (those no other read is reading already): ticks
        that miss only them wait for it (`after_reads`). `settle` it when done, read or not."""
        made = []
        for task_id in ids:
            if task_id not in self._pending:
                future = asyncio.get_running_loop().create_future()
                self._pending[task_id] = future
                made.append((task_id, future))
        return made

    def settle(self, promised: list[tuple[int, asyncio.Future[None]]]) -> None:
        for task_id, future in promised:
            if self._pending.get(task_id) is future:
                del self._pending[task_id]
            if not future.done():
                future.set_result(None)

    async def after_reads(self, ids: Iterable[int], within: float) -> bool:
        """Wait (at most `within` s) for the reads under way of all these rows; False at once
        when one of them is not being read."""
        futures = [self._pending.get(i) for i in ids]
        if not futures or any(f is None for f in futures):
            return False
        await asyncio.wait([f for f in futures if f is not None], timeout=within)
        return True

    def learn_whole(self, r: Reading, task: TaskRow, role: Role, title: str | None) -> None:
        """A row read whole (with its ticket's title as a reader of `role` was shown it), kept
        for the other pages that will find it changed (desk/reads/recall.py)."""
        if not _title_shared(task, role) or not self._fresh(r, "task", task.id):
            return
        self.whole[task.id] = Whole(task, micros(task.updated_at), title)
        self.whole.move_to_end(task.id)
        if len(self.whole) > MAX_WHOLE:
            self.whole.popitem(last=False)

    def learn_paused(self, r: Reading, paused: frozenset[str]) -> None:
        if self._fresh(r, "lanes", 0):
            self.paused = paused
