"""The page watcher's unchanged tick, answered from the process's memory of the change feed
without a database statement (docs/architecture.md, "Change feed").

Most ticks find nothing new: the rows the page shows are still at their versions, the bell at its
count, the list has nothing newer the viewer may see, the session still lives. `vouch` tells
what of that the memory (`desk.reads.memory`) alone can vouch for: all of it, and the tick is
the 204 the full tick (watcher.py) would have answered, with no statement; a part of it, and
the full tick reads only the rest. Whatever the memory cannot vouch for (never told, forgotten,
the listener not connected) or what did change is read from the database.

`learn` is the other half: what a full tick read is remembered for the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from desk.core.feed import TaskNote
from desk.core.models import Role, TaskStatus
from desk.ledger import lanes
from desk.ledger import rules as task_rules
from desk.people import access, sessions
from desk.reads import tick
from desk.reads.memory import Memory, Reading, SessionMemo
from ui.watch import polling
from ui.watch.watched import Watched

MISSING = object()
VERSIONS_MAX = 100_000

# A row's version as the page shows it, for each remembered row as it stands (a TaskNote is a
# value: a change is another key): worked out once, not once per page that watches the row,
# until its label may turn by time (`rules.label_turns_at`).
_versions: dict[tuple[TaskNote, bool], tuple[str, float]] = {}


def _version(note: TaskNote, paused: bool, now: datetime) -> str:
    stamp = now.timestamp()
    hit = _versions.get((note, paused))
    if hit is not None and stamp < hit[1]:
        return hit[0]
    label = task_rules.status_label(note, now)
    turns = task_rules.label_turns_at(note, now)
    version = polling.version(note.updated_us, label, paused)
    if len(_versions) >= VERSIONS_MAX:
        _versions.clear()  # a bound, not an LRU: a forgotten version is worked out again
    _versions[(note, paused)] = (version, turns.timestamp() if turns else float("inf"))
    return version


def _member(
    memory: Memory, members: dict[int, access.Member | None], user_id: int, team_id: int
) -> access.Member | None:
    """The viewer's membership of `team_id` as the memory knows it, looked up once per team and
    tick (`members`), not once per watched row."""
    if team_id not in members:
        role = memory.role(user_id, team_id)
        members[team_id] = None if role is None else access.Member(user_id, team_id, role)
    return members[team_id]


def _row_unchanged(
    memory: Memory,
    members: dict[int, access.Member | None],
    user_id: int,
    w: Watched,
    now: datetime,
    age: float,
) -> bool:
    note = memory.row(w.id)
    if note is None or age >= polling.STOP_AFTER:
        return False
    member = _member(memory, members, user_id, note.team_id)
    if member is None or not access.can_see_task(member, note.kind, note.owner_id):
        return False
    paused = False
    if note.status == TaskStatus.WAITING:
        lanes_paused = memory.lanes_paused()
        if lanes_paused is None:
            return False
        paused = lanes.lane_of(note.kind) in lanes_paused
    return _version(note, paused, now) == w.version


@dataclass
class Vouch:
    """What the memory vouches did not change since the page's copy."""

    rows: dict[int, float]  # watched rows still at the page's version: id -> watched for (s)
    bell: bool  # the unread count is the page's
    list_quiet: bool  # nothing newer in the list the viewer may see (or no list)
    mark: int  # the list is checked up to this task id
    whole: bool  # all of the page: a 204 with no statement


def vouch(
    memory: Memory,
    secret: str,
    team_cookie: int | None,
    now: datetime,
    watched: list[Watched],
    *,
    bell: int | None,
    list_kind: object,
    after: int,
) -> Vouch | None:
    """What of the page the memory can vouch for; None without a live session it knows.
    `list_kind`: MISSING when the page has no list, else the list's kind (None: every kind);
    `after`: the id the page's list is known to be checked up to."""
    memo = memory.session(sessions.session_digest(secret), now) if secret else None
    if memo is None:
        return None
    user_id = memo.user_id
    stamp = now.timestamp()
    rows = {}
    members: dict[int, access.Member | None] = {}
    for w in watched:
        age = stamp - min(w.since, stamp)
        if _row_unchanged(memory, members, user_id, w, now, age):
            rows[w.id] = age
    same_bell = bell is None or memory.unread_of(user_id) == bell
    quiet = list_kind is MISSING
    team_id = team_cookie if team_cookie is not None else memo.first_team
    if not quiet and team_id is not None:
        role = memory.role(user_id, team_id)
        kind = None if list_kind is None or list_kind is MISSING else str(list_kind)
        if role is not None:
            member = access.Member(user_id, team_id, role)
            quiet = memory.newer_notes(member, after, kind, 1) == []
    whole = quiet and same_bell and len(rows) == len({w.id for w in watched})
    return Vouch(rows, same_bell, quiet, memory.horizon, whole)


def learn(
    memory: Memory, r: Reading, secret: str, found: tick.Tick, team_cookie: int | None
) -> None:
    """Remember what a full tick read (the session, the roles and rows it saw, the lanes)."""
    s = found.session
    user_id = s.person.id
    teams = tuple(s.teams) if s.teams is not None else None
    first = found.list_team if team_cookie is None else None
    memo = SessionMemo(user_id, s.person, s.csrf, found.expires_at, teams, first)
    memory.learn_session(r, sessions.session_digest(secret), memo, s.unread)
    roles: list[tuple[int, Role]] = []
    if found.list_team is not None and found.list_role is not None:
        roles.append((found.list_team, found.list_role))
    for row in found.rows.values():
        roles.append((row.team_id, row.role))
        memory.learn_row(r, tick.note_of(row))
        hit = row.hit()
        if hit.task is not None:
            memory.learn_whole(r, hit.task, row.role, hit.ticket_title)
        if row.state.status == TaskStatus.WAITING:
            memory.learn_paused(r, row.paused_lanes)
    page = found.listing
    if page is not None and found.list_role is not None:
        for task in page.items:
            memory.learn_whole(r, task, found.list_role, page.titles.get(task.ticket_id or 0))
        if any(t.status == TaskStatus.WAITING for t in page.items):  # read with them only then
            memory.learn_paused(r, page.paused_lanes)
    memory.learn_roles(r, user_id, roles)
