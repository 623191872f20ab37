"""Lanes: which kinds of task share worker capacity, and the operators' pause of a lane.

Short work (reminders, e-mails) runs in the `short` lane, long work (exports, imports) in the `long`
lane. Each lane has its own arq queue and its own slots in every worker, so a long task can
never take a short slot (jobs/worker.py). In the long lane one team may run at most
`LONG_TEAM_MAX_RUNNING` tasks at once (the dispatcher and the claim enforce it in
desk/ledger/accept.py), so one team cannot hold every long slot.

A paused lane still accepts tasks; they stay WAITING and unsent until it is resumed (the
dispatcher and the web's direct send both skip it). The pause is a row in `task_lane`.

Stable API (the operators' console builds on it): `LANES`, `lane_of(kind)`,
`kinds_of(lane)`, `slots(settings, lane)`, `async pause(rt, lane, by_user_id)`,
`async resume(rt, lane, by_user_id)`, `async states(rt) -> list[LaneState]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import ValidationProblem
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.ledger import sql
from desk.people import audit

SHORT = "short"
LONG = "long"
# Lane name -> the task kinds it runs. Every TaskKind is in exactly one lane.
LANES: dict[str, tuple[str, ...]] = {
    SHORT: ("REMINDER", "NOOP", "EMAIL", "MAIL_FETCH", "MAIL_PARSE", "SLA_TIMER", "TIME_RULE"),
    LONG: ("EXPORT", "IMPORT"),
}
_LANE_OF = {kind: lane for lane, kinds in LANES.items() for kind in kinds}


def lane_of(kind: str) -> str:
    """The lane a task kind runs in (an unknown kind runs in the short lane)."""
    return _LANE_OF.get(kind, SHORT)


def kinds_of(lane: str) -> tuple[str, ...]:
    return LANES[check(lane)]


def check(lane: str) -> str:
    """The lane name, or a typed 422 naming the lanes that exist."""
    if lane not in LANES:
        raise ValidationProblem("lane", f"unknown lane {lane!r}; lanes are {', '.join(LANES)}")
    return lane


def slots(settings: Settings, lane: str) -> int:
    """Tasks of this lane one worker process runs at once."""
    return settings.worker_max_jobs if check(lane) == SHORT else settings.worker_long_slots


def lane_sql(column: str = "kind") -> str:
    """A SQL expression giving the lane of a task row's `kind` (for the ledger's queries)."""
    whens = " ".join(f"WHEN '{k}' THEN '{lane}'" for k, lane in _LANE_OF.items())
    return f"(CASE {column} {whens} ELSE '{SHORT}' END)"


SET_PAUSED = (
    "INSERT INTO task_lane (name, paused, paused_by_id, paused_at, updated_at) "
    "VALUES (%(n)s, %(p)s, %(by)s, %(at)s, %(now)s) ON CONFLICT (name) DO UPDATE SET "
    " paused = %(p)s, paused_by_id = %(by)s, paused_at = %(at)s, updated_at = %(now)s"
)
PAUSED = "SELECT name FROM task_lane WHERE paused"
ALL_LANES = "SELECT * FROM task_lane"
CLI_ACTOR = "cli"  # `taskdesk lanes` names the account that ran it (see taskdesk/commands/lanes.py)


@dataclass(frozen=True)
class LaneState:
    name: str
    kinds: tuple[str, ...]
    paused: bool
    paused_by: int | None  # user id of the operator who paused it (None: the CLI)
    paused_at: datetime | None
    slots: int  # per worker process
    team_max_running: int | None  # per-team cap in this lane (None: no cap)


async def _set(
    conn: AsyncConnection, lane: str, paused: bool, by: int | None, now: datetime
) -> None:
    params = {
        "n": lane,
        "p": paused,
        "by": by if paused else None,
        "at": now if paused else None,
        "now": now,
    }
    await sql.execute(conn, SET_PAUSED, params)


async def pause(
    rt: Runtime, lane: str, by_user_id: int | None, actor: str = CLI_ACTOR
) -> LaneState:
    """Stop sending the lane's tasks (running ones finish; new ones are accepted and wait)."""
    return await _change(rt, lane, True, by_user_id, actor)


async def resume(
    rt: Runtime, lane: str, by_user_id: int | None = None, actor: str = CLI_ACTOR
) -> LaneState:
    """Send the lane's tasks again; the dispatcher's next pass sends what waited."""
    return await _change(rt, lane, False, by_user_id, actor)


async def _change(
    rt: Runtime, lane: str, paused: bool, by_user_id: int | None, actor: str
) -> LaneState:
    # The audit row commits with the change it records, whoever made it (console or CLI).
    check(lane)
    now = rt.clock()
    async with rt.engine.begin() as conn:
        await _set(conn, lane, paused, by_user_id, now)
        action = "lane_pause" if paused else "lane_resume"
        await audit.record(
            conn, at=now, actor_id=by_user_id, actor=actor, action=action, detail=lane
        )
    return await state(rt, lane)


async def paused_lanes(conn: AsyncConnection) -> set[str]:
    return {r["name"] for r in await sql.rows(conn, PAUSED, {})}


async def states(rt: Runtime) -> list[LaneState]:
    """Every lane, in `LANES` order, with its pause state and configured slots."""
    async with rt.engine.connect() as conn:
        stored = {r["name"]: r for r in await sql.rows(conn, ALL_LANES, {})}
    out = []
    for name, kinds in LANES.items():
        row = stored.get(name)
        paused = bool(row and row["paused"])
        out.append(
            LaneState(
                name=name,
                kinds=kinds,
                paused=paused,
                paused_by=row["paused_by_id"] if row and paused else None,
                paused_at=row["paused_at"] if row and paused else None,
                slots=slots(rt.settings, name),
                team_max_running=rt.settings.long_team_max_running if name == LONG else None,
            )
        )
    return out


async def state(rt: Runtime, lane: str) -> LaneState:
    return next(s for s in await states(rt) if s.name == check(lane))
