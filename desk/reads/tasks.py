"""The hot read API both faces call: pages and GraphQL ask "who is this session?", "what is task N
for this person?", "which of a team's tasks may they see?" here, one statement each, on `rt.pg`
(autocommit, no pre-ping, no BEGIN/ROLLBACK, no ORM objects).

Visibility is `desk.people.access.TASK_REACH`, the one rule (docs/architecture.md, "Visibility"):
a single task is filtered in Python by `access.can_see_task`; a list, which must filter before its
LIMIT, by `access.task_visibility_sql`, both made from that rule. A task you may not see reads as
None, exactly like a missing one.

The statements are composed with `psycopg.sql` from the pieces below; `desk.reads.tick` builds
its one statement per tick from the same builders (`task_sql`, `list_sql`, `title_sql`, …) with
the session's user as the reader, so a row, a list and a session read the same there as here.

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

from psycopg import sql

from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import Role, TaskKind, TaskStatus
from desk.core.pg import Pg
from desk.core.rows import TASK_COLUMNS, TaskRow
from desk.people import access, sessions


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


__all__ = ["TASK_COLUMNS", "TaskRow"]  # the row type lives in desk.core.rows; read from here

MAX_PAGE = 100
Sql = sql.Composable
U = sql.Placeholder("u")  # the reader, when the statement is the caller's alone


def render(statement: Sql) -> str:
    """A composed statement as the text psycopg caches the parsing of (no connection needed:
    identifiers and literals here are plain ASCII)."""
    return statement.as_string(None)


def task_columns(alias: str = "t") -> Sql:
    """`TaskRow`'s columns of the table aliased `alias`, in its order."""
    # Plain names, not quoted identifiers: fixed, and the tick's statement must stay short.
    return sql.SQL(", ").join(sql.SQL(f"{alias}.{c}") for c in TASK_COLUMNS)


def visible_sql(reader: Sql) -> Sql:
    """`access.task_visibility_sql` over task `t` and the reader's membership row `m`."""
    return access.task_visibility_sql(
        sql.SQL("m.role"), sql.SQL("t.kind"), sql.SQL("t.owner_id"), reader
    )


def title_sql(reader: Sql) -> Sql:
    """A reminder's ticket title, only when the reader may see that ticket
    (`access.can_see_ticket`)."""
    return sql.SQL(
        "(SELECT k.title FROM ticket k JOIN membership km ON km.team_id = k.team_id "
        "AND km.user_id = {u} WHERE k.id = t.ticket_id "
        "AND (km.role IN ('ADMIN', 'STAFF') OR k.creator_id = {u}))"
    ).format(u=reader)


PAUSED_SQL = sql.SQL("ARRAY(SELECT name FROM task_lane WHERE paused)")
# The columns a task statement adds after the task's own, in this order.
HIT_COLUMNS = ("member_role", "ticket_title", "paused")


def task_sql(reader: Sql, where: Sql) -> Sql:
    """The tasks `t` matching `where` with the reader's role in their team (NULL: not a member),
    a reminder's ticket title and, for a waiting task, the paused lanes (`HIT_COLUMNS`)."""
    return sql.SQL(
        "SELECT {cols}, m.role AS member_role, "
        "CASE WHEN t.kind = 'REMINDER' THEN {title} END AS ticket_title, "
        "CASE WHEN t.status = 'WAITING' THEN {paused} END AS paused "
        "FROM background_task t "
        "LEFT JOIN membership m ON m.team_id = t.team_id AND m.user_id = {u} "
        "WHERE {where}"
    ).format(cols=task_columns(), title=title_sql(reader), paused=PAUSED_SQL, u=reader, where=where)


_TASK_SQL = render(task_sql(U, sql.SQL("t.id = %(task)s")))
_TASKS_SQL = render(task_sql(U, sql.SQL("t.id = ANY(%(ids)s)")))

# A task statement's columns as a tuple row: the task's, then `HIT_COLUMNS`.
_N = len(TASK_COLUMNS)
_ROLE, _TITLE, _PAUSED = (_N + HIT_COLUMNS.index(c) for c in HIT_COLUMNS)


def _hit(data: Sequence[Any] | None, user_id: int) -> TaskHit:
    """`task_sql`'s columns (a tuple row, or a slice of one) as the reader sees them."""
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


# --- the session behind a cookie, and its person ----------------------------------------------


# The session's person, with `u` the session's user: the columns `viewer` reads first, by name.
PERSON_COLUMNS = tuple(f.name for f in fields(Person))
TEAMS_SQL = sql.SQL(
    "(SELECT coalesce(json_agg(json_build_array(tm.id, tm.name, mm.role) ORDER BY tm.name), "
    "'[]') FROM membership mm JOIN team tm ON tm.id = mm.team_id WHERE mm.user_id = u.id)"
)
UNREAD_SQL = sql.SQL(
    "(SELECT count(*) FROM notification n WHERE n.user_id = u.id AND n.read_at IS NULL)"
)
# The live session behind `%(sid)s` at `%(now)s`, over `web_session s` joined to its `app_user u`.
SESSION_LIVE = sql.SQL("s.id = %(sid)s AND s.revoked_at IS NULL AND s.expires_at > %(now)s")
SESSION_USER = sql.SQL("u.id")


def person_columns() -> Sql:
    return sql.SQL(", ").join(sql.SQL(f"u.{c}") for c in PERSON_COLUMNS)


@cache
def viewer_sql(with_teams: bool, with_task: bool, with_unread: bool = False) -> str:
    """`viewer`'s statement (desk.reads.ticket_page reads the ticket page with it)."""
    # Read as a tuple row: csrf and the person's columns, then teams and unread when asked, then
    # the task part — `task_sql` as a lateral join whose reader is the session's user.
    cols: list[Sql] = [sql.SQL("s.csrf"), person_columns()]
    cols += [TEAMS_SQL] if with_teams else []
    cols += [UNREAD_SQL] if with_unread else []
    joins: Sql = sql.SQL("")
    if with_task:
        cols.append(sql.SQL("x.*"))
        one = task_sql(SESSION_USER, sql.SQL("t.id = %(task)s"))
        joins = sql.SQL(" LEFT JOIN LATERAL ({}) x ON true").format(one)
    statement = sql.SQL(
        "SELECT {cols} FROM web_session s JOIN app_user u ON u.id = s.user_id{joins} WHERE {live}"
    )
    return render(statement.format(cols=sql.SQL(", ").join(cols), joins=joins, live=SESSION_LIVE))


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
    data = await pg.row(viewer_sql(teams, with_task, unread), params)
    return None if data is None else session_view(data, teams=teams, task=with_task, unread=unread)


def session_view(
    data: Sequence[Any], *, teams: bool, task: bool = False, unread: bool = False
) -> SessionView:
    """`viewer_sql`'s row (a tuple row, or its first columns) as a SessionView."""
    at = 1 + len(PERSON_COLUMNS)
    person = Person(*data[1:at])
    team_list = None
    if teams:
        team_list = [TeamRef(t[0], t[1], Role(t[2])) for t in data[at]]
        at += 1
    count = None
    if unread:
        count = int(data[at])
        at += 1
    hit = _hit(data[at:], person.id) if task else None
    return SessionView(person, data[0], team_list, hit, count)


# --- a team's tasks -------------------------------------------------------------------------


# A list's optional conditions, by the parameter that carries each.
FILTERS = {
    "kind": sql.SQL("t.kind = %(kind)s"),
    "status": sql.SQL("t.status = %(status)s"),
    "after": sql.SQL("t.id < %(after)s"),
    "newer": sql.SQL("t.id > %(newer)s"),
    "ticket": sql.SQL("t.ticket_id = %(ticket)s"),
}
# A list statement's row: the task's columns, then these two.
LIST_ROW = (*TASK_COLUMNS, "ticket_title", "paused")
_L_ID, _L_TICKET, _L_TITLE, _L_PAUSED = (
    LIST_ROW.index(c) for c in ("id", "ticket_id", "ticket_title", "paused")
)


def list_sql(reader: Sql, team: Sql, filters: tuple[str, ...], *, exists: bool) -> Sql:
    """The reader's membership row of `team` LEFT JOINed to the tasks of it they may see and
    that pass `filters` (keys of `FILTERS`), newest first, at most `%(lim)s`: no row at all
    means "not a member", a row of NULLs "a member, no such task". Its columns are `LIST_ROW`;
    with `exists`, only whether there is one (`found`)."""
    where = sql.SQL(" AND ").join(
        [sql.SQL("t.team_id = m.team_id"), sql.SQL("({})").format(visible_sql(reader))]
        + [FILTERS[f] for f in filters]
    )
    member = sql.SQL("WHERE m.user_id = {u} AND m.team_id = {team}").format(u=reader, team=team)
    if exists:
        return sql.SQL(
            "SELECT x.found FROM membership m CROSS JOIN LATERAL "
            "(SELECT EXISTS (SELECT 1 FROM background_task t WHERE {where}) AS found) x {member}"
        ).format(where=where, member=member)
    return sql.SQL(
        "SELECT x.*, CASE WHEN bool_or(x.status = 'WAITING') OVER () THEN {paused} END AS paused "
        "FROM membership m LEFT JOIN LATERAL (SELECT {cols}, "
        "CASE WHEN t.kind = 'REMINDER' THEN {title} END AS ticket_title "
        "FROM background_task t WHERE {where} ORDER BY t.id DESC LIMIT %(lim)s) x ON true "
        "{member} ORDER BY x.id DESC"
    ).format(
        paused=PAUSED_SQL, cols=task_columns(), title=title_sql(reader), where=where, member=member
    )


_MEMBER_SQL = "SELECT 1 AS one FROM membership WHERE user_id = %(u)s AND team_id = %(team)s"


@cache
def _list_text(filters: tuple[str, ...], exists: bool) -> str:
    return render(list_sql(U, sql.Placeholder("team"), filters, exists=exists))


def _filters(
    params: dict[str, Any],
    kind: str | None,
    after: str | None,
    newer_than: int | None,
    status: str | None = None,
    ticket_id: int | None = None,
) -> tuple[str, ...]:
    if kind:
        if kind not in {k.value for k in TaskKind}:
            raise ValidationProblem("kind", "unknown task kind")
        params["kind"] = str(kind)
    if status:
        if status not in {s.value for s in TaskStatus}:
            raise ValidationProblem("status", "unknown status")
        params["status"] = str(status)
    if after:
        before = inputs.optional_id(inputs.cursor("after", after))
        if before is None:
            raise ValidationProblem("after", "not a cursor this list gave out")
        params["after"] = before
    if newer_than is not None:
        params["newer"] = newer_than
    if ticket_id is not None:
        params["ticket"] = ticket_id
    return tuple(f for f in FILTERS if f in params)


def page_of(rows: Sequence[Sequence[Any]], first: int) -> TaskPage:
    """A list statement's tuple rows (`LIST_ROW` first; a member's row of NULLs left out), newest
    first, as a page of `first`."""
    rows = [r for r in rows if r[_L_ID] is not None]
    items = [TaskRow(*r[:_N]) for r in rows[:first]]
    titles = {r[_L_TICKET]: r[_L_TITLE] for r in rows if r[_L_TITLE] is not None}
    paused = frozenset(rows[0][_L_PAUSED] or ()) if rows else frozenset()
    cursor = str(items[-1].id) if items else None
    return TaskPage(items, cursor, len(rows) > first, titles, paused)


async def list_tasks(
    pg: Pg,
    user_id: int,
    team_id: int,
    *,
    first: int = 50,
    after: str | None = None,
    kind: str | None = None,
    newer_than: int | None = None,
    status: str | None = None,
    ticket_id: int | None = None,
) -> TaskPage:
    """A team's tasks `user_id` may see, newest first, with the reminders' ticket titles and
    (when a row waits) the paused lanes; a non-member gets NotFound, as for a missing team.
    `after` is the cursor of the previous page; `newer_than` a task id (the cheap "anything new
    since the newest row I show?" check)."""
    if not 1 <= first <= MAX_PAGE:
        raise ValidationProblem("first", f"between 1 and {MAX_PAGE}")
    params: dict[str, Any] = {"u": user_id, "team": team_id, "lim": first + 1}
    try:
        filters = _filters(params, kind, after, newer_than, status, ticket_id)
    except ValidationProblem:
        # A non-member learns only that there is no such team, whatever else was wrong.
        if await pg.one(_MEMBER_SQL, params) is None:
            raise NotFound("Team not found.") from None
        raise
    rows = await pg.rows(_list_text(filters, False), params)
    if not rows:
        raise NotFound("Team not found.")
    return page_of(rows, first)


async def anything_newer(
    pg: Pg, user_id: int, team_id: int, newest: int, *, kind: str | None = None
) -> bool:
    """Is there a task `user_id` may see in the team with an id above `newest`? (NotFound for
    a non-member.)"""
    params: dict[str, Any] = {"u": user_id, "team": team_id}
    data = await pg.one(_list_text(_filters(params, kind, None, newest), True), params)
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
