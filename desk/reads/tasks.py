"""The hot read API both faces call: pages and GraphQL ask "who is this session?", "what is task N
for this person?", "which of a team's tasks may they see?" here, one statement each, on `rt.pg`
(autocommit, no pre-ping, no BEGIN/ROLLBACK, no ORM objects).

Visibility is `desk.people.access.can_see_task`, the one rule: a single task is filtered in Python by
that function; a list, which must filter before its LIMIT, uses `_VISIBLE_SQL`, the same rule
written over the member's role (tests/desk/test_reads.py holds the two to the same answers).
A task you may not see reads as None, exactly like a missing one.

A polled fragment needs the viewer and often one task: `viewer` reads the session, its user and,
when asked, that task (with its membership, the reminder's ticket title and the paused lanes) in
ONE statement, so a row fragment costs one checkout and one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import cache
from typing import Any

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import Role, TaskKind
from desk.core.pg import Pg
from desk.people import access, sessions


@dataclass(frozen=True, slots=True)
class TaskRow:
    """The ledger columns people see of a task, named as on `BackgroundTask` (GraphQL's `Task`
    and the pages' `TaskView` wrap it)."""

    id: int
    kind: str
    status: str
    progress: float
    progress_current: int
    progress_total: int | None
    progress_message: str
    attempts: int
    max_attempts: int
    last_error: str | None
    note: str
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result_summary: str | None
    summary_key: str | None
    summary_params: dict[str, Any]
    result_skipped: bool
    result_bytes: int | None
    expires_at: datetime | None
    cancel_requested: bool
    lease_until: datetime | None
    filters: dict[str, Any]
    stats: dict[str, Any]
    team_id: int
    owner_id: int
    ticket_id: int | None
    updated_at: datetime  # a watched row's version (ui.polling.row_version) is made of it


@dataclass(frozen=True, slots=True)
class TaskHit:
    """One task as a row shows it: None when missing or not visible, plus what the row adds."""

    task: TaskRow | None
    ticket_title: str | None = None  # a reminder's ticket, when the reader may see it
    paused_lanes: frozenset[str] = frozenset()  # read only for a WAITING task


@dataclass(frozen=True, slots=True)
class Person:
    """The signed-in user, as pages show them (no password hash leaves the database)."""

    id: int
    email: str
    display_name: str
    locale: str
    timezone: str


@dataclass(frozen=True, slots=True)
class TeamRef:
    team_id: int
    team_name: str
    role: Role


@dataclass(frozen=True, slots=True)
class SessionView:
    person: Person
    csrf: str
    teams: list[TeamRef] | None  # only when asked for
    task: TaskHit | None  # only when asked for
    unread: int | None = None  # unread notifications, only when asked for


@dataclass(frozen=True, slots=True)
class TaskPage:
    items: list[TaskRow]
    end_cursor: str | None
    has_next: bool
    titles: dict[int, str]  # ticket id -> title, for the page's reminders the reader may see
    paused_lanes: frozenset[str]  # read only when a row of the page waits


TASK_COLUMNS = tuple(f.name for f in fields(TaskRow))
_T_COLUMNS = ", ".join(f"t.{c}" for c in TASK_COLUMNS)
MAX_PAGE = 100

# `access.can_see_task` over the membership row `m` of the reader %(u)s (lists filter before
# LIMIT, so the rule has to be SQL there; kinds as in TaskKind).
_VISIBLE_SQL = (
    "CASE t.kind WHEN 'EXPORT' THEN t.owner_id = %(u)s "
    "WHEN 'REMINDER' THEN m.role IN ('ADMIN', 'STAFF') "
    "WHEN 'IMPORT' THEN m.role = 'ADMIN' OR (m.role = 'STAFF' AND t.owner_id = %(u)s) "
    "ELSE t.owner_id = %(u)s END"
)
# A reminder's ticket title, only when the reader may see that ticket (access.can_see_ticket).
_TITLE_SQL = (
    "(SELECT k.title FROM ticket k JOIN membership km ON km.team_id = k.team_id "
    "AND km.user_id = %(u)s WHERE k.id = t.ticket_id "
    "AND (km.role IN ('ADMIN', 'STAFF') OR k.creator_id = %(u)s))"
)
_PAUSED_SQL = "ARRAY(SELECT name FROM task_lane WHERE paused)"

# One task with the reader's membership of its team; `%(u)s` is the reader.
_TASK_SQL = (
    f"SELECT {_T_COLUMNS}, m.role AS member_role, "
    f"CASE WHEN t.kind = 'REMINDER' THEN {_TITLE_SQL} END AS ticket_title, "
    f"CASE WHEN t.status = 'WAITING' THEN {_PAUSED_SQL} END AS paused "
    "FROM background_task t "
    "LEFT JOIN membership m ON m.team_id = t.team_id AND m.user_id = %(u)s "
    "WHERE t.id = %(task)s"
)


# `_TASK_SQL`'s columns as a tuple row: the task's, then these three.
_N = len(TASK_COLUMNS)
_ROLE, _TITLE, _PAUSED = _N, _N + 1, _N + 2


def _hit(data: Sequence[Any] | None, user_id: int) -> TaskHit:
    """`_TASK_SQL`'s columns (a tuple row, or a slice of one) as the reader sees them."""
    if data is None or data[0] is None or data[_ROLE] is None:
        return TaskHit(None)
    task = TaskRow(*data[:_N])
    member = access.Member(user_id, task.team_id, Role(data[_ROLE]))
    if not access.can_see_task(member, task.kind, task.owner_id):
        return TaskHit(None)
    return TaskHit(task, data[_TITLE], frozenset(data[_PAUSED] or ()))


async def task(pg: Pg, user_id: int, task_id: int) -> TaskHit:
    """Task `task_id` as `user_id` may see it (`.task` None: missing or not theirs to see)."""
    data = await pg.row(_TASK_SQL, {"u": user_id, "task": task_id})
    return _hit(data, user_id)


_TASKS_SQL = _TASK_SQL.replace("WHERE t.id = %(task)s", "WHERE t.id = ANY(%(ids)s)")


async def tasks(pg: Pg, user_id: int, ids: list[int]) -> dict[int, TaskHit]:
    """The tasks among `ids` that `user_id` may see, by id, in one statement (a page watcher's
    rows); a missing one and one not theirs to see are both simply absent."""
    if not ids:
        return {}
    out: dict[int, TaskHit] = {}
    for data in await pg.rows(_TASKS_SQL, {"u": user_id, "ids": ids}):
        hit = _hit(data, user_id)
        if hit.task is not None:
            out[hit.task.id] = hit
    return out


async def visible_task(pg: Pg, user_id: int, task_id: int) -> TaskRow | None:
    return (await task(pg, user_id, task_id)).task


# --- the session behind a cookie, and its person ----------------------------------------------


_TEAMS_SQL = (
    "(SELECT coalesce(json_agg(json_build_array(tm.id, tm.name, mm.role) ORDER BY tm.name), "
    "'[]') FROM membership mm JOIN team tm ON tm.id = mm.team_id WHERE mm.user_id = u.id)"
)


_UNREAD_SQL = "(SELECT count(*) FROM notification n WHERE n.user_id = u.id AND n.read_at IS NULL)"


_PERSON_COLS = "s.csrf, u.id, u.email, u.display_name, u.locale, u.timezone"


@cache
def _viewer_sql(with_teams: bool, with_task: bool, with_unread: bool = False) -> str:
    # Read as a tuple row: the session's six columns, then teams and unread when asked, then
    # the task part — `_TASK_SQL` as a lateral join whose reader is the session's user.
    cols = _PERSON_COLS
    cols += f", {_TEAMS_SQL}" if with_teams else ""
    cols += f", {_UNREAD_SQL}" if with_unread else ""
    joins = ""
    if with_task:
        cols += ", x.*"
        joins = f" LEFT JOIN LATERAL ({_TASK_SQL.replace('%(u)s', 'u.id')}) x ON true"
    return (
        f"SELECT {cols} FROM web_session s JOIN app_user u ON u.id = s.user_id{joins} "
        "WHERE s.id = %(sid)s AND s.revoked_at IS NULL AND s.expires_at > %(now)s"
    )


async def viewer(
    pg: Pg,
    secret: str,
    now: datetime,
    *,
    teams: bool = False,
    task_id: int | None = None,
    unread: bool = False,
) -> SessionView | None:
    """The live session behind a cookie's secret with its person (None: unknown, revoked or
    expired); with `teams`, the person's teams by name; with `task_id`, that task as they may
    see it; with `unread`, their unread notifications. One statement whatever is asked."""
    if not secret or len(secret) > 128:
        return None
    with_task = task_id is not None
    params: dict[str, Any] = {"sid": sessions.session_digest(secret), "now": now}
    if with_task:
        params["task"] = task_id
    data = await pg.row(_viewer_sql(teams, with_task, unread), params)
    if data is None:
        return None
    person = Person(*data[1:6])
    at = 6
    team_list = None
    if teams:
        team_list = [TeamRef(t[0], t[1], Role(t[2])) for t in data[at]]
        at += 1
    count = None
    if unread:
        count = int(data[at])
        at += 1
    hit = _hit(data[at:], person.id) if with_task else None
    return SessionView(person, data[0], team_list, hit, count)


# --- a team's tasks -------------------------------------------------------------------------


def _list_sql(clauses: list[str], *, exists: bool) -> str:
    """The member row LEFT JOINed to the visible tasks: no row at all means "not a member"."""
    where = " AND ".join(["t.team_id = m.team_id", f"({_VISIBLE_SQL})", *clauses])
    if exists:
        inner = f"SELECT EXISTS (SELECT 1 FROM background_task t WHERE {where}) AS found"
        return (
            f"SELECT x.found FROM membership m CROSS JOIN LATERAL ({inner}) x "
            "WHERE m.user_id = %(u)s AND m.team_id = %(team)s"
        )
    inner = (
        f"SELECT {_T_COLUMNS}, CASE WHEN t.kind = 'REMINDER' THEN {_TITLE_SQL} END AS ticket_title "
        f"FROM background_task t WHERE {where} ORDER BY t.id DESC LIMIT %(lim)s"
    )
    return (
        f"SELECT x.*, CASE WHEN bool_or(x.status = 'WAITING') OVER () THEN {_PAUSED_SQL} END "
        f"AS paused FROM membership m LEFT JOIN LATERAL ({inner}) x ON true "
        "WHERE m.user_id = %(u)s AND m.team_id = %(team)s ORDER BY x.id DESC"
    )


def _filters(
    params: dict[str, Any], kind: str | None, after: str | None, newer_than: int | None
) -> list[str]:
    clauses = []
    if kind:
        if kind not in {k.value for k in TaskKind}:
            raise ValidationProblem("kind", "unknown task kind")
        clauses.append("t.kind = %(kind)s")
        params["kind"] = str(kind)
    if after:
        before = inputs.optional_id(inputs.cursor("after", after))
        if before is None:
            raise ValidationProblem("after", "not a cursor this list gave out")
        clauses.append("t.id < %(after)s")
        params["after"] = before
    if newer_than is not None:
        clauses.append("t.id > %(newer)s")
        params["newer"] = newer_than
    return clauses


async def list_tasks(
    pg: Pg,
    user_id: int,
    team_id: int,
    *,
    first: int = 50,
    after: str | None = None,
    kind: str | None = None,
    newer_than: int | None = None,
) -> TaskPage:
    """A team's tasks `user_id` may see, newest first, with the reminders' ticket titles and
    (when a row waits) the paused lanes; a non-member gets NotFound, as for a missing team."""
    if not 1 <= first <= MAX_PAGE:
        raise ValidationProblem("first", f"between 1 and {MAX_PAGE}")
    params: dict[str, Any] = {"u": user_id, "team": team_id, "lim": first + 1}
    clauses = _filters(params, kind, after, newer_than)
    rows = await pg.all(_list_sql(clauses, exists=False), params)
    if not rows:
        raise NotFound("Team not found.")
    rows = [r for r in rows if r["id"] is not None]
    items = [TaskRow(*(r[c] for c in TASK_COLUMNS)) for r in rows[:first]]
    titles = {r["ticket_id"]: r["ticket_title"] for r in rows if r["ticket_title"] is not None}
    paused = frozenset(rows[0]["paused"] or ()) if rows else frozenset()
    cursor = str(items[-1].id) if items else None
    return TaskPage(items, cursor, len(rows) > first, titles, paused)


async def anything_newer(
    pg: Pg, user_id: int, team_id: int, newest: int, *, kind: str | None = None
) -> bool:
    """Is there a task `user_id` may see in the team with an id above `newest`? (NotFound for
    a non-member.)"""
    params: dict[str, Any] = {"u": user_id, "team": team_id}
    data = await pg.one(_list_sql(_filters(params, kind, None, newest), exists=True), params)
    if data is None:
        raise NotFound("Team not found.")
    return bool(data["found"])


# --- small counts the header polls --------------------------------------------------------------


async def unread_count(pg: Pg, user_id: int) -> int:
    data = await pg.one(
        "SELECT count(*) AS n FROM notification WHERE user_id = %(u)s AND read_at IS NULL",
        {"u": user_id},
    )
    return int(data["n"]) if data else 0


async def oldest_overdue(pg: Pg, now: datetime) -> datetime | None:
    """The run time of the oldest WAITING task already due (the health badge's "overdue")."""
    data = await pg.one(
        "SELECT min(run_at) AS oldest FROM background_task "
        "WHERE status = 'WAITING' AND run_at <= %(now)s",
        {"now": now},
    )
    return data["oldest"] if data else None


async def paused_lanes(pg: Pg) -> frozenset[str]:
    return frozenset(r["name"] for r in await pg.all("SELECT name FROM task_lane WHERE paused"))


async def ticket_titles(pg: Pg, user_id: int, ticket_ids: list[int]) -> dict[int, str]:
    """Titles of the given tickets that `user_id` may see (others are left out)."""
    if not ticket_ids:
        return {}
    rows = await pg.all(
        "SELECT t.id, t.title FROM ticket t JOIN membership m ON m.team_id = t.team_id "
        "AND m.user_id = %(u)s WHERE t.id = ANY(%(ids)s) "
        "AND (m.role IN ('ADMIN', 'STAFF') OR t.creator_id = %(u)s)",
        {"u": user_id, "ids": ticket_ids},
    )
    return {r["id"]: r["title"] for r in rows}
