"""The page watcher's tick answered from the web process's memory of the change feed, without a
statement (docs/architecture.md, "Change feed"): the `tick.Tick` the statement would read, made of
what the memory holds — when it holds all of it.

`desk.reads.memory` vouches for what did NOT change (ui/watch/unchanged.py); this is the other case, a
tick that finds news. On a busy team every page watches the same rows, so each change is news to
every page: the first page to see a row at its new version reads it (the statement), and the
memory keeps that whole row (`Memory.learn_whole`) for the others, as long as the feed's notice
still names that version. So one change costs one read, not one per page that shows it.

Anything not remembered (the session, the unread count, a role, the row at this version, the
lanes' pauses of a waiting row, the tasks created above the page's newest) makes it None: the
caller reads the tick from the database. When only rows or the unread count are missing (a
`Gap` with `rows`), the statement reads just those, not every watched row (`fill`); and when
the missing rows are being read by another tick already (a change seen by many pages at once),
the caller waits for that read (`Memory.promise`/`after_reads`) rather than make it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from desk.core.memo import ByObject
from desk.core.models import Role, TaskStatus
from desk.core.rows import TaskRow
from desk.people import access, sessions
from desk.reads import tick
from desk.reads.memory import Memory, SessionMemo, Whole
from desk.reads.tasks import SessionView, TaskPage, TeamRef


@dataclass(frozen=True, slots=True)
class Gap:
    """Why the memory could not answer. With `rows` None, it lacks what only the whole
    statement tells (the session, a role, the rows' team, how far back the list's news reach).
    Otherwise only these watched rows (`rows`), the list's new rows (`list_missing`) or the
    unread count are missing: the statement reads just those (`fill`), and `known`/`page` are
    what the memory had. `waits`: every row it lacks, the list's included."""

    rows: frozenset[int] | None
    waits: frozenset[int] = frozenset()
    known: Mapping[int, tick.Row] = field(default_factory=dict)
    page: TaskPage | None = None
    list_missing: bool = False


HARD = Gap(None)
# A remembered row as a watched `tick.Row`, made once per row object, title, lanes' pauses and
# role, and shared by the ticks of every page that shows it (`row_of` was ~10 µs a row, per page).
_made: ByObject[tick.Row] = ByObject(4096)


async def remembered(
    memory: Memory,
    secret: str,
    now: datetime,
    ids: Sequence[int],
    *,
    team_id: int | None,
    listing: tick.ListAsk | None,
    wait: float,
) -> tick.Tick | Gap:
    """`recall`, and when it lacks only rows other ticks are reading, again after those reads
    (waiting `wait` s at most): a change every page sees at once is read once, not once per page
    that ticks meanwhile."""
    found = recall(memory, secret, now, ids, team_id=team_id, listing=listing)
    if isinstance(found, Gap) and found.waits and await memory.after_reads(found.waits, wait):
        found = recall(memory, secret, now, ids, team_id=team_id, listing=listing)
    return found


def recall(
    memory: Memory,
    secret: str,
    now: datetime,
    ids: Sequence[int],
    *,
    team_id: int | None,
    listing: tick.ListAsk | None,
) -> tick.Tick | Gap:
    """`tick.tick`'s answer for the same arguments, from memory; a `Gap` when it cannot tell."""
    memo = memory.session(sessions.session_digest(secret), now) if secret else None
    if memo is None or (team_id is None and memo.teams is None):
        return HARD
    unread = memory.unread_of(memo.user_id)
    list_team = team_id if team_id is not None else memo.first_team
    list_role = memory.role(memo.user_id, list_team) if list_team is not None else None
    missing: set[int] = set()
    rows = _rows(memory, memo.user_id, ids, missing)
    if rows is None:
        return HARD
    page, listed = None, set[int]()
    if listing is not None and list_team is not None:
        if list_role is None:  # not a member, or not remembered: the statement tells which
            return HARD
        page = _page(memory, access.Member(memo.user_id, list_team, list_role), listing, listed)
        if page is None:
            return HARD
    if missing or listed or unread is None:
        return Gap(frozenset(missing), frozenset(missing | listed), rows, page, bool(listed))
    session = SessionView(memo.person, memo.csrf, _teams(memo, team_id), None, unread)
    return tick.Tick(session, rows, page, list_team, list_role, memo.expires_at)


def fill(gap: Gap, read: tick.Tick | None) -> tick.Tick | None:
    """A soft gap's tick: what the statement read of the missing parts (with the session, which
    it always reads) over what the memory had. None: the session ended meanwhile."""
    if read is None:
        return None
    page = read.listing if gap.list_missing else gap.page
    rows = {**gap.known, **read.rows}
    return tick.Tick(read.session, rows, page, read.list_team, read.list_role, read.expires_at)


def _teams(memo: SessionMemo, team_id: int | None) -> list[TeamRef] | None:
    return list(memo.teams) if team_id is None and memo.teams is not None else None


def _paused(memory: Memory, tasks: Sequence[TaskRow]) -> frozenset[str] | None:
    """The lanes' pauses when a row waits (the row says so), else none needed."""
    if not any(t.status == TaskStatus.WAITING for t in tasks):
        return frozenset()
    return memory.lanes_paused()


def _rows(
    memory: Memory, user_id: int, ids: Sequence[int], missing: set[int]
) -> dict[int, tick.Row] | None:
    """The watched rows; None when one is not known at all. Rows known at a version not read
    whole go to `missing`."""
    rows: dict[int, tick.Row] = {}
    for task_id in ids:
        note = memory.row(task_id)
        role = memory.role(user_id, note.team_id) if note is not None else None
        if note is None or role is None:
            return None
        member = access.Member(user_id, note.team_id, role)
        if not access.can_see_task(member, note.kind, note.owner_id):
            continue  # as the statement: a row the reader may not see is not there
        whole = memory.whole_of(note, role)
        if whole is None:
            missing.add(task_id)
            continue
        paused = _paused(memory, [whole.task])
        if paused is None:
            return None
        rows[task_id] = _row_of(whole, paused, role)
    return rows


def _row_of(whole: Whole, paused: frozenset[str], role: Role) -> tick.Row:
    make = lambda: tick.row_of(whole.task, whole.title, paused, role)  # noqa: E731
    return _made.get(whole.task, (whole.title, paused, role), make)


def _page(
    memory: Memory, member: access.Member, ask: tick.ListAsk, missing: set[int]
) -> TaskPage | None:
    """The list's rows above the page's newest, as `reads.page_of` pages them (None: the memory
    cannot tell; a row not read whole at its version goes to `missing`). A page that shows no
    row yet gets the whole list: that is read."""
    if ask.newest == 0:
        return None
    kind = None if ask.kind is None else str(ask.kind)
    notes = memory.newer_notes(member, ask.newest, kind, ask.first + 1)
    if notes is None:
        return None
    items: list[TaskRow] = []
    titles: dict[int, str] = {}
    for note in notes:
        whole = memory.whole_of(note, member.role)
        if whole is None:
            missing.add(note.id)
            continue
        items.append(whole.task)
        if whole.title is not None and whole.task.ticket_id is not None:
            titles[whole.task.ticket_id] = whole.title
    shown = items[: ask.first]
    paused = _paused(memory, items)
    if paused is None:
        return None
    cursor = str(shown[-1].id) if shown else None
    return TaskPage(shown, cursor, len(items) > ask.first, titles, paused)
