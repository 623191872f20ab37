"""The ledger's send SQL: which due tasks the dispatcher hands to Redis, and the bookkeeping of
those sends (reserve, hand back, list what Redis should hold after it lost its data, compare
with the queue).

A send is reserved in the ledger (`sends + 1`, `dispatched_at`) before the message goes to
Redis, so a dispatcher that dies between the two only delays the task by the redelivery window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core import metrics
from desk.core.queue import Send
from desk.ledger import sql
from desk.ledger.lanes import LANES, LONG, lane_of, lane_sql

# Urgent work goes ahead of the rest of its lane's line in Redis (docs/architecture.md,
# "Priorities"): reminders, which someone set for a moment, and security mail (a password
# reset, an invitation), which someone is waiting for; bulk and conversation mail and the rest
# keep their due-time order behind them.
URGENT_KINDS = ("REMINDER",)
URGENT_TEMPLATES = ("password_reset", "invitation")


def urgent(kind: str, template: str | None = None) -> bool:
    """Whether a task of `kind` (an e-mail of `template`) is urgent; `urgent_sql` asks the same."""
    return kind in URGENT_KINDS or (kind == "EMAIL" and template in URGENT_TEMPLATES)


def urgent_sql(t: str) -> str:
    """`urgent` of the row `t` (a table alias), in SQL."""
    kinds = ", ".join(f"'{k}'" for k in URGENT_KINDS)
    templates = ", ".join(f"'{k}'" for k in URGENT_TEMPLATES)
    return (
        f"({t}.kind IN ({kinds}) OR ({t}.kind = 'EMAIL' "
        f"AND {t}.filters->>'template' IN ({templates})))"
    )


@dataclass(frozen=True)
class Due:
    """A send reserved in the ledger: hand `{task_id, run}` to Redis as send number `send`."""

    task_id: int
    run: int
    run_at: datetime
    send: int
    kind: str
    urgent: bool = False

    @property
    def lane(self) -> str:
        return lane_of(self.kind)

    def message(self) -> Send:
        """The hand-off to Redis this send reserved."""
        return Send(self.task_id, self.run, self.send, self.lane, self.run_at, self.urgent)


_LONG_KINDS = ", ".join(f"'{k}'" for k in LANES[LONG])
# Teams that already run as many long tasks as one team may (`long_team_max_running`).
FULL_TEAMS = (
    "SELECT team_id FROM background_task WHERE status = 'RUNNING' "
    f" AND kind IN ({_LONG_KINDS}) GROUP BY team_id HAVING count(*) >= %(team_max)s"
)


def _sendable(row: str) -> str:
    """The row `row` (a table alias) may be sent now: its lane is not paused, and it is not a
    long task of a team whose long slots are full (`full_teams`, a CTE of FULL_TEAMS)."""
    return (
        f"{lane_sql(f'{row}.kind')} NOT IN (SELECT name FROM task_lane WHERE paused) "
        f"AND NOT ({row}.kind IN ({_LONG_KINDS}) "
        f"AND {row}.team_id IN (SELECT team_id FROM full_teams))"
    )


_RETURNING = f"RETURNING b.id, b.run, b.run_at, b.sends, b.kind, {urgent_sql('b')} AS urgent"
# A team's e-mail (not a password reset's, which has no team) shares the short lane with every
# other team's work: at most `mail_max` of one team's due e-mails are in Redis, sent and not yet
# claimed, at a time, so 5,000 of one team's e-mails cannot stand in front of another team's
# reminder (docs/architecture.md, "Fair sends"). The rest wait in the ledger, unsent; each
# dispatcher pass tops the team up, its oldest first.
_TEAM_MAIL = "({t}.kind = 'EMAIL' AND {t}.team_id IS NOT NULL)"
_MAIL_QUEUED = (
    "SELECT team_id, count(*) AS queued FROM background_task "
    "WHERE status = 'WAITING' AND run_at <= %(now)s AND kind = 'EMAIL' AND team_id IS NOT NULL "
    " AND dispatched_at IS NOT NULL GROUP BY team_id"
)
_DUE = (
    "status = 'WAITING' AND run_at <= %(horizon)s "
    "AND (dispatched_at IS NULL OR greatest(dispatched_at, run_at) < %(stale)s)"
)
CLAIM_DUE = (
    f"WITH full_teams AS ({FULL_TEAMS}), mail_queued AS ({_MAIL_QUEUED}), "
    # Everything but a team's never-sent e-mail, as before: a redelivery of a team's e-mail too
    # (it already counts as queued, and a window of lost sends must still be sent again).
    f"others AS (SELECT id FROM background_task t WHERE {_DUE} AND {_sendable('t')} "
    f"  AND NOT ({_TEAM_MAIL.format(t='t')} AND t.dispatched_at IS NULL) "
    "  ORDER BY run_at LIMIT %(lim)s FOR UPDATE SKIP LOCKED), "
    # A team's never-sent e-mails, each team's oldest first, as many as its window has room for.
    "ranked AS (SELECT c.id, c.team_id, "
    "  row_number() OVER (PARTITION BY c.team_id ORDER BY c.run_at, c.id) AS rn "
    "  FROM background_task c WHERE c.status = 'WAITING' AND c.run_at <= %(horizon)s "
    f"   AND c.dispatched_at IS NULL AND {_TEAM_MAIL.format(t='c')}), "
    # Materialized: folded into `mail`'s IN, the window over every unsent e-mail was run again
    # for each of them whenever the statistics predated a storm (50-145 s a claim at 5,000;
    # bench/ noisy-team); computed once it is a few ms, and holds a window per team at most.
    "picked AS MATERIALIZED (SELECT r.id FROM ranked r "
    "   LEFT JOIN mail_queued q ON q.team_id = r.team_id "
    "   WHERE r.rn <= %(mail_max)s - coalesce(q.queued, 0)), "
    "mail AS (SELECT id FROM background_task t WHERE t.id IN (SELECT id FROM picked) "
    f"  AND {_DUE} AND t.dispatched_at IS NULL AND {_sendable('t')} "
    "  ORDER BY run_at LIMIT %(lim)s FOR UPDATE SKIP LOCKED) "
    "UPDATE background_task b SET dispatched_at = %(now)s, sends = b.sends + 1 "
    "FROM (SELECT id FROM others UNION SELECT id FROM mail) due "
    f"WHERE b.id = due.id {_RETURNING}"
)
# A kick (right after a state change) sends a team's e-mail only while its window has room.


def mail_queued_sql(team: str) -> str:
    """How many of team `team`'s due e-mails are in Redis (sent, not yet claimed), counted up to
    `%(mail_max)s` (the window: no need to count past it)."""
    return (
        "(SELECT count(*) FROM (SELECT 1 FROM background_task q WHERE q.status = 'WAITING' "
        f" AND q.run_at <= %(now)s AND q.team_id = {team} AND q.kind = 'EMAIL' "
        " AND q.dispatched_at IS NOT NULL LIMIT %(mail_max)s) w)"
    )


_MAIL_ROOM = f"NOT ({_TEAM_MAIL.format(t='b')} AND {mail_queued_sql('b.team_id')} >= %(mail_max)s)"
RESERVE_SEND = (
    f"WITH full_teams AS ({FULL_TEAMS}) "
    "UPDATE background_task b SET dispatched_at = %(now)s, sends = b.sends + 1 "
    "WHERE b.id = %(id)s AND b.run = %(run)s AND b.status = 'WAITING' "
    f" AND b.dispatched_at IS NULL AND {_sendable('b')} AND {_MAIL_ROOM} {_RETURNING}"
)
NO_WINDOW = 1_000_000_000  # `mail_max` when the caller sets none: no team's e-mail is held back
UNSEND = (
    "UPDATE background_task b SET dispatched_at = NULL FROM "
    " unnest(CAST(%(ids)s AS bigint[]), CAST(%(sends)s AS int[])) AS u(id, send) "
    "WHERE b.id = u.id AND b.sends = u.send AND b.status = 'WAITING'"
)
SENT_WAITING = (
    f"SELECT id, run, run_at, sends, kind, {urgent_sql('w')} AS urgent FROM background_task w "
    "WHERE status = 'WAITING' AND dispatched_at IS NOT NULL AND id > %(after)s "
    " AND id <> ALL(CAST(%(keep)s AS bigint[])) ORDER BY id LIMIT %(lim)s"
)
HOLD = (
    "SELECT EXISTS (SELECT 1 FROM task_lane WHERE name = %(lane)s AND paused) AS lane_paused, "
    f" (%(long)s AND %(team)s IN ({FULL_TEAMS})) AS team_full"
)
SENDS_OF = (
    "SELECT id, status, run, sends FROM background_task WHERE id = ANY(CAST(%(ids)s AS bigint[]))"
)


@dataclass(frozen=True)
class Hold:
    """What keeps a WAITING task from being sent (`_sendable`, read for one task)."""

    lane_paused: bool = False
    team_full: bool = False  # a long task whose team runs `team_max` long tasks already


def _dues(rows: list[dict[str, Any]]) -> list[Due]:
    return [Due(r["id"], r["run"], r["run_at"], r["sends"], r["kind"], r["urgent"]) for r in rows]


async def claim_due(
    db: sql.Db,
    *,
    now: datetime,
    lookahead: timedelta,
    redelivery: timedelta,
    limit: int,
    team_max: int,
    mail_max: int = NO_WINDOW,
) -> list[Due]:
    """Reserve the next send of due WAITING tasks: never sent, or sent longer ago than the
    redelivery window. Paused lanes are skipped, and long tasks of a team that already runs
    `team_max` of them wait for one to end; of a team's e-mails at most `mail_max` are in Redis at
    a time. On `rt.pg` the claim is one autocommit statement: its reservations commit before any
    of its messages reaches Redis."""
    found = await sql.rows(
        db,
        CLAIM_DUE,
        {
            "now": now,
            "horizon": now + lookahead,
            "stale": now - redelivery,
            "lim": limit,
            "team_max": team_max,
            "mail_max": mail_max,
        },
    )
    dues = _dues(found)
    metrics.sent(dues)
    return dues


async def reserve_send(
    conn: AsyncConnection,
    task_id: int,
    run: int,
    *,
    now: datetime,
    team_max: int,
    mail_max: int = NO_WINDOW,
) -> Due | None:
    """Reserve the next send of one unsent WAITING task (a kick right after a state change);
    None when a dispatcher got there first, its lane is paused, its team's long slots are full
    or, for a team's e-mail, `mail_max` of them are in Redis already (the dispatcher sends it)."""
    params = {"id": task_id, "run": run, "now": now, "team_max": team_max, "mail_max": mail_max}
    found = await sql.rows(conn, RESERVE_SEND, params)
    dues = _dues(found)
    return dues[0] if dues else None


async def hold(conn: AsyncConnection, kind: str, team_id: int, *, team_max: int) -> Hold:
    """Why a task of `kind` in `team_id` would not be sent now, as the sweep decides it."""
    lane = lane_of(kind)
    params = {"lane": lane, "long": lane == LONG, "team": team_id, "team_max": team_max}
    found = await sql.one(conn, HOLD, params)
    return Hold(**found) if found else Hold()


async def unsend(db: sql.Db, due: list[Due]) -> None:
    """Sends Redis did not take: let the next sweep try again at once (unless a later send or
    a state change happened meanwhile)."""
    await sql.execute(db, UNSEND, {"ids": [d.task_id for d in due], "sends": [d.send for d in due]})


async def sent_waiting(
    conn: AsyncConnection, *, keep: list[int], after: int, limit: int
) -> list[Due]:
    """The latest sends of WAITING tasks (but `keep`'s), by id from `after` on: what Redis
    should hold when it may have lost its data. `unsend` hands back the ones it lost."""
    found = await sql.rows(conn, SENT_WAITING, {"keep": keep, "after": after, "lim": limit})
    return _dues(found)


async def sends_of(conn: AsyncConnection, task_ids: list[int]) -> dict[int, tuple[str, int, int]]:
    """(status, run, sends) per task id: which queue entries are of a send the ledger moved past."""
    found = await sql.rows(conn, SENDS_OF, {"ids": task_ids})
    return {r["id"]: (r["status"], r["run"], r["sends"]) for r in found}
