"""The page watcher's unchanged tick, answered from the process's memory of the change feed
without a database statement (docs/architecture.md, "Change feed").

Most ticks find nothing new: the rows the page shows are still at their versions, the bell at its
count, the list has nothing newer the viewer may see, the session still lives. `unchanged` tells
that from `desk.reads.memory` alone and answers the 204 the full tick (ui/watch.py) would have
answered; whenever the memory cannot vouch for one part (never told, forgotten, the listener not
connected) or something did change, it answers None and the full tick reads the database.

`learn` is the other half: what a full tick read is remembered for the next one.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from desk.core.models import Role
from desk.ledger import lanes
from desk.ledger import rules as task_rules
from desk.people import access, sessions
from desk.reads import tick
from desk.reads.memory import Memory, Reading, SessionMemo
from ui import polling

if TYPE_CHECKING:
    from ui.watch import Watched

MISSING = object()


def _row_unchanged(memory: Memory, user_id: int, w: Watched, now: datetime, age: float) -> bool:
    note = memory.row(w.id)
    if note is None or age >= polling.STOP_AFTER:
        return False
    role = memory.role(user_id, note.team_id)
    if role is None or not access.can_see_task(
        access.Member(user_id, note.team_id, role), note.kind, note.owner_id
    ):
        return False
    paused = False
    if note.status == "WAITING":
        lanes_paused = memory.lanes_paused()
        if lanes_paused is None:
            return False
        paused = lanes.lane_of(note.kind) in lanes_paused
    label = task_rules.status_label(note, now)
    return polling.version(note.updated_us, label, paused) == w.version


def unchanged(
    memory: Memory,
    secret: str,
    team_cookie: int | None,
    now: datetime,
    watched: list[Watched],
    *,
    bell: int | None,
    list_kind: object,
    after: int,
) -> tuple[list[float], int] | None:
    """(the rows' ages, the list's new mark) when nothing the page shows changed, as far as the
    memory can vouch; None when the database must be asked. `list_kind`: MISSING when the page
    has no list, else the list's kind (None: every kind); `after`: the id the page's list is
    known to be checked up to."""
    memo = memory.session(sessions.session_digest(secret), now) if secret else None
    if memo is None:
        return None
    user_id = memo.user_id
    if bell is not None and memory.unread_of(user_id) != bell:
        return None
    stamp = now.timestamp()
    ages = []
    for w in watched:
        age = stamp - min(w.since, stamp)
        if not _row_unchanged(memory, user_id, w, now, age):
            return None
        ages.append(age)
    team_id = team_cookie if team_cookie is not None else memo.first_team
    if list_kind is not MISSING and team_id is not None:
        role = memory.role(user_id, team_id)
        if role is None:
            return None
        kind = None if list_kind is None else str(list_kind)
        if memory.newer_visible(access.Member(user_id, team_id, role), after, kind) is not False:
            return None
    return ages, memory.horizon


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
        if row.state.status == "WAITING":
            memory.learn_paused(r, row.paused_lanes)
    memory.learn_roles(r, user_id, roles)
