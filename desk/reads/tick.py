"""The page watcher's tick in ONE statement (docs/architecture.md, "Polling"): who is asking,
their unread count, every watched row as they may see it, and the list's "anything newer than N
visible to me?".

A tick used to be four round trips (the session with the bell's count, the rows' versions, the
changed rows, the list check); on a saturated web process their driver work was ~45 % of its
samples. Here they are the branches of one statement, composed with `psycopg.sql` from the
builders `desk.reads.tasks` exports for this (`list_sql` for the list, `title_sql` and
`PAUSED_SQL` for a row's extras, the session's and the bell's columns) with the session's user
as the reader, so a row, a list and a session cannot read differently here than there:

    SELECT <session, person, unread, list team[, teams]> FROM web_session … (one row, or none)
    LEFT JOIN LATERAL (  1, the watched rows, each as `reads.task` reads it
                       UNION ALL
                         2, the list's rows newer than N, as `reads.list_tasks` reads them ) x

Every result row is `HEAD` then `BRANCH`: positions are worked out from those names, never
counted by hand. The caller (ui.watch.watcher) tells changed rows from unchanged ones with the versions
it computes from the rows themselves; nothing is read twice. tests/desk/reads/test_tick.py holds every
part to the answers of the separate reads, for each role.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, make_dataclass
from datetime import datetime
from functools import cache
from operator import attrgetter, itemgetter
from typing import Any

from psycopg import sql

from desk.core.clock import micros
from desk.core.feed import TaskNote
from desk.core.models import Role, TaskKind, TaskStatus
from desk.core.pg import Pg
from desk.core.rows import TASK_COLUMNS, TaskRow
from desk.ledger.rules import TaskLike
from desk.people import access, sessions
from desk.reads import tasks as reads
from desk.reads.tasks import Person, TaskHit, TaskPage, TeamRef

READER = sql.SQL("v.id")  # the session's user, in the statement's `v`
# The session's row, first in every result row; "teams" (as JSON text) only when asked.
HEAD = ("csrf", "session_expires", *reads.PERSON_COLUMNS, "unread", "list_team", "list_role")
# A branch's row after the head: which branch, the task, its extras and the reader's role.
BRANCH = ("part", *TASK_COLUMNS, "ticket_title", "paused", "member_role")
_H = {c: i for i, c in enumerate(HEAD)}
_PERSON = slice(_H[reads.PERSON_COLUMNS[0]], _H[reads.PERSON_COLUMNS[-1]] + 1)
_N = len(TASK_COLUMNS)
_AT = {c: i for i, c in enumerate(BRANCH[1:])}  # in a branch's row without its `part`
_TITLE, _PAUSED, _ROLE = (_AT[c] for c in ("ticket_title", "paused", "member_role"))
_ID, _KIND, _OWNER, _TEAM, _UPDATED = (
    _AT[c] for c in ("id", "kind", "owner_id", "team_id", "updated_at")
)
# The list branch's rows start as `reads.list_sql`'s do: `reads.page_of` reads them as they are.
assert BRANCH[1 : 1 + len(reads.LIST_ROW)] == reads.LIST_ROW

# The user's first team by name: the team a page works in when no team cookie says one
# (ui.viewer._choose_team picks the first of `reads.TEAMS_SQL`'s list, ordered by name).
_FIRST_TEAM_SQL = sql.SQL(
    "(SELECT mm.team_id FROM membership mm JOIN team tm ON tm.id = mm.team_id "
    "WHERE mm.user_id = u.id ORDER BY tm.name LIMIT 1)"
)

# What `task_rules.status_label` reads (the properties of `TaskLike`), as a projection of
# `TaskRow`: its fields, in its order, with its types.
LABEL_FIELDS = tuple(n for n, v in vars(TaskLike).items() if isinstance(v, property))
State: type[Any] = make_dataclass(
    "State",
    [(f.name, f.type) for f in fields(TaskRow) if f.name in LABEL_FIELDS],
    frozen=True,
    slots=True,
)
State.__module__ = __name__
State.__doc__ = "The fields `task_rules.status_label` reads (a TaskLike), from a watched row."
_STATE = itemgetter(*(_AT[f.name] for f in fields(State)))  # one C call per row


@dataclass(frozen=True, slots=True)
class Row:
    """A watched row the reader may see: what its version is made of, and the whole row."""

    state: TaskLike
    updated_at: datetime
    paused_lanes: frozenset[str]
    data: tuple[Any, ...]  # a `BRANCH` row without its part
    # The row remembered whole it was made of (`row_of`): `hit` hands it back instead of
    # building the same TaskRow again, once per changed row of every tick that shows it.
    task: TaskRow | None = field(default=None, compare=False)

    @property
    def team_id(self) -> int:
        return int(self.data[_TEAM])

    @property
    def role(self) -> Role:
        """The reader's role in the row's team."""
        return _ROLES[self.data[_ROLE]]

    def hit(self) -> TaskHit:
        """The row as `reads.task` gives it."""
        # As `reads._hit` builds it; visibility was its rule already (`_row`).
        task = self.task if self.task is not None else TaskRow(*self.data[:_N])
        return TaskHit(task, self.data[_TITLE], self.paused_lanes)


_ROLES = {r.value: r for r in Role}  # Role(x) without the enum's call, per row of every tick
_TASK_VALUES = attrgetter(*TASK_COLUMNS)  # a TaskRow's values in column order, one C call


def note_of(row: Row) -> TaskNote:
    """A watched row as a notice of the change feed would tell it (desk.reads.memory)."""
    st = row.state
    return TaskNote(
        int(row.data[_ID]),
        row.team_id,
        st.owner_id,
        st.kind,
        st.status,
        micros(row.updated_at),
        st.run_at,
        st.lease_until,
        st.expires_at,
        st.cancel_requested,
        st.attempts,
        st.result_skipped,
        st.result_bytes,
    )


def row_of(task: TaskRow, title: str | None, paused: frozenset[str], role: Role) -> Row:
    """A watched row as `_row` makes it of a read, made of a row remembered whole
    (desk/reads/recall.py): the same `data`, so the caller cannot tell the two apart."""
    waiting = task.status == TaskStatus.WAITING
    data = (
        *_TASK_VALUES(task),
        title if task.kind == "REMINDER" else None,
        sorted(paused) if waiting else None,
        role.value,
    )
    state = State(*_STATE(data))
    return Row(state, task.updated_at, paused if waiting else frozenset(), data, task)


def _row(data: Sequence[Any], reader: int) -> Row | None:
    """`reads._hit`'s rule (missing, not a member, not theirs to see: None), without decoding."""
    role = data[_ROLE]
    if data[_ID] is None or role is None:
        return None
    member = access.Member(reader, data[_TEAM], _ROLES[role])
    if not access.can_see_task(member, data[_KIND], data[_OWNER]):
        return None
    state = State(*_STATE(data))
    paused = frozenset(data[_PAUSED] or ())
    return Row(state, data[_UPDATED], paused, tuple(data))


# `reads.task_sql` for each watched id, the session's user as the reader, in `BRANCH`'s order.
# Kept under psycopg's 4,096-byte limit for caching a statement's parsing
# (MAX_CACHED_STATEMENT_LENGTH): above it every execute parses it again.
_WATCHED = sql.SQL(
    "SELECT {cols}, "
    "CASE WHEN t.kind = 'REMINDER' THEN {title} END AS ticket_title, "
    "CASE WHEN t.status = 'WAITING' THEN {paused} END AS paused, "
    "m.role AS member_role "
    # The ids as a literal (see `_array`); bigint: ids are checked only as 18 digits.
    "FROM unnest(%(ids)s::bigint[]) w(id) "
    "JOIN background_task t ON t.id = w.id "
    "LEFT JOIN membership m ON m.team_id = t.team_id AND m.user_id = {u}"
).format(
    cols=reads.task_columns(),
    title=reads.title_sql(READER),
    paused=reads.PAUSED_SQL,
    u=READER,
)


def _array(values: Sequence[int]) -> str:
    """An int array as its literal: psycopg dumps a list element by element in Python, which
    cost more than the rest of the statement for a page's 60 rows."""
    return "{" + ",".join(str(int(n)) for n in values) + "}"


@dataclass(frozen=True, slots=True)
class ListAsk:
    """The list's check: rows of `team` (None: the user's first team) above `newest`."""

    team_id: int | None
    newest: int
    first: int
    kind: TaskKind | None = None


@dataclass(frozen=True, slots=True)
class Tick:
    session: reads.SessionView
    rows: dict[int, Row]  # the watched rows the reader may see (others: absent)
    listing: TaskPage | None  # None: not asked, or not a member of that team
    list_team: int | None  # the team the list was read for
    list_role: Role | None  # the reader's role there (None: not a member)
    expires_at: datetime  # the session's end


def _list_branch(kind: bool) -> sql.Composable:
    """`reads.list_sql` with the session's user and the list's team, in `BRANCH`'s order; its
    member-without-rows row (all NULL) stays: it says "a member, nothing newer"."""
    filters = ("kind", "newer") if kind else ("newer",)
    inner = reads.list_sql(READER, sql.SQL("v.list_team"), filters, exists=False)
    # `y.*` is `reads.LIST_ROW` (spelt out, the statement would pass psycopg's caching limit).
    return sql.SQL("SELECT 2, y.*, NULL::text FROM ({}) y").format(inner)


@cache
def _sql(with_teams: bool, with_list: bool, with_kind: bool) -> str:
    head = [
        sql.SQL("s.csrf, s.expires_at"),
        reads.person_columns(),
        sql.SQL("{} AS unread, lt.team AS list_team, lm.role").format(reads.UNREAD_SQL),
    ]
    # As text: the head is repeated on every row, and only the first row's is decoded.
    head += [sql.SQL("{}::text AS teams").format(reads.TEAMS_SQL)] if with_teams else []
    branches = sql.SQL("SELECT 1 AS part, r.* FROM ({}) r").format(_WATCHED)
    if with_list:
        branches = sql.SQL("{} UNION ALL {}").format(branches, _list_branch(with_kind))
    # MATERIALIZED: the session's row (with its subqueries) is worked out once, not once for
    # every row it is joined to.
    return reads.render(
        sql.SQL(
            "WITH v AS MATERIALIZED (SELECT {head} FROM web_session s "
            "JOIN app_user u ON u.id = s.user_id "
            "CROSS JOIN LATERAL (SELECT coalesce(%(team)s::bigint, {first}) AS team) lt "
            "LEFT JOIN membership lm ON lm.user_id = u.id AND lm.team_id = lt.team WHERE {live}) "
            "SELECT v.*, x.* FROM v LEFT JOIN LATERAL ({branches}) x ON true"
        ).format(
            head=sql.SQL(", ").join(head),
            first=_FIRST_TEAM_SQL,
            live=reads.SESSION_LIVE,
            branches=branches,
        )
    )


async def tick(
    pg: Pg,
    secret: str,
    now: datetime,
    ids: Sequence[int],
    *,
    team_id: int | None,
    teams: bool = False,
    listing: ListAsk | None = None,
) -> Tick | None:
    """The tick of the session behind a cookie's secret (None: unknown, revoked or expired).
    `team_id` is the team cookie's (None: the user's first team, and `teams` is read)."""
    if not secret or len(secret) > 128:
        return None
    params: dict[str, Any] = {
        "sid": sessions.session_digest(secret),
        "now": now,
        "ids": _array(ids),
        "team": team_id,
    }
    if listing is not None:
        params |= {"newer": listing.newest, "lim": listing.first + 1}
        if listing.kind is not None:
            params["kind"] = str(listing.kind)
    kind = listing is not None and listing.kind is not None
    found = await pg.rows(_sql(teams, listing is not None, kind), params)
    if not found:
        return None
    head = found[0]
    person = Person(*head[_PERSON])
    team_list = None
    if teams:
        team_list = [TeamRef(t[0], t[1], Role(t[2])) for t in json.loads(head[len(HEAD)])]
    at = len(HEAD) + (1 if teams else 0)  # the branch's `part`
    session = reads.SessionView(person, head[_H["csrf"]], team_list, None, int(head[_H["unread"]]))
    rows: dict[int, Row] = {}
    listed: list[Sequence[Any]] = []
    member = False
    for data in found:
        part, task = data[at], data[at + 1 :]
        if part == 1:
            row = _row(task, person.id)
            if row is not None:
                rows[task[_ID]] = row
        elif part == 2:
            member = True
            listed.append(task)
    page = None
    if listing is not None and member:
        listed.sort(key=lambda r: -(r[_ID] or 0))  # newest first, as `reads.list_tasks` reads them
        page = reads.page_of(listed, listing.first)
    role = head[_H["list_role"]]
    return Tick(
        session,
        rows,
        page,
        head[_H["list_team"]],
        _ROLES[role] if role else None,
        head[_H["session_expires"]],
    )
