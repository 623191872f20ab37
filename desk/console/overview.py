"""What the operators' console reads: counts per kind, throughput and failures over time, start
latency and reminder lateness, the oldest overdue task, and the task search — each scoped by
`desk.people.operators.Scope` (an operator sees every team, a team admin their own).

Counts read only active rows and rows finished within the window, through the partial indexes on
WAITING/RUNNING and finished_at; nothing here scans the whole ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.console import task_admin
from desk.console.task_admin import OpsRow
from desk.core import inputs
from desk.core.errors import NotFound, ValidationProblem
from desk.core.models import BackgroundTask, TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.ledger.lanes import lane_sql
from desk.people.operators import Scope

OVERDUE_AFTER = timedelta(seconds=30)  # as /health: due and still not started after this long


@dataclass
class KindCounts:
    kind: str
    queued: int = 0
    scheduled: int = 0
    retrying: int = 0
    running: int = 0
    failed: int = 0  # in the last hour
    completed: int = 0  # in the last hour


@dataclass(frozen=True)
class Series:
    """Finished tasks per bucket, oldest first; `minutes` is the bucket width."""

    minutes: int
    completed: list[int]
    failed: list[int]


@dataclass(frozen=True)
class Percentiles:
    p50: float | None
    p95: float | None
    count: int


@dataclass(frozen=True)
class TeamBacklog:
    """One team's work in one lane: due and not started, running, and since when the oldest
    due task waits (a team whose due work piles up while others' does not is what to look at)."""

    team_id: int | None
    team: str | None  # None: tasks of no team (a password reset's e-mail)
    lane: str
    due: int
    running: int
    oldest_due_at: datetime | None


BACKLOG_TEAMS = 20  # the teams with the most due work; the console links to the task list for more


@dataclass
class Overview:
    now: datetime
    kinds: list[KindCounts]
    hour: Series
    day: Series
    start_latency: Percentiles
    reminder_lateness: Percentiles
    oldest_overdue: BackgroundTask | None
    teams: list[TeamBacklog] = field(default_factory=list)
    totals: KindCounts = field(init=False)

    def __post_init__(self) -> None:
        self.totals = add_up("ALL", self.kinds)

    def by_lane(self, lane_of: Callable[[str], str]) -> list[KindCounts]:
        """The same counts per lane (`kind` holds the lane's name), in first-seen order."""
        lanes: dict[str, list[KindCounts]] = {}
        for k in self.kinds:
            lanes.setdefault(lane_of(k.kind), []).append(k)
        return [add_up(name, members) for name, members in lanes.items()]

    @property
    def overdue_seconds(self) -> float | None:
        if self.oldest_overdue is None:
            return None
        return (self.now - self.oldest_overdue.run_at).total_seconds()


def add_up(name: str, counts: list[KindCounts]) -> KindCounts:
    t = KindCounts(name)
    for k in counts:
        for f in ("queued", "scheduled", "retrying", "running", "failed", "completed"):
            setattr(t, f, getattr(t, f) + getattr(k, f))
    return t


async def overview(rt: Runtime, scope: Scope) -> Overview:
    now = rt.clock()
    where, params = scope.sql()
    params |= {"now": now, "hour": now - timedelta(hours=1), "soon": now + timedelta(seconds=5)}
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(
                "SELECT kind, "
                " count(*) FILTER (WHERE status = 'WAITING' AND attempts = 0 AND run_at <= :soon) q, "
                " count(*) FILTER (WHERE status = 'WAITING' AND attempts = 0 AND run_at > :soon) s, "
                " count(*) FILTER (WHERE status = 'WAITING' AND attempts > 0) r, "
                " count(*) FILTER (WHERE status = 'RUNNING') run, "
                " count(*) FILTER (WHERE status = 'FAILED' AND finished_at >= :hour) f, "
                " count(*) FILTER (WHERE status = 'COMPLETED' AND finished_at >= :hour) c "
                "FROM background_task b WHERE (status IN ('WAITING', 'RUNNING') "
                f" OR finished_at >= :hour) AND {where} GROUP BY kind"
            ),
            params,
        )
        found = {r.kind: KindCounts(r.kind, r.q, r.s, r.r, r.run, r.f, r.c) for r in rows}
        hour = await _series(conn, where, params, now, minutes=1, buckets=60)
        day = await _day_series(rt, scope, conn, where, params, now)
        latency, lateness = await _latencies(conn, where, params)
        oldest = (
            await conn.execute(
                sa.text(
                    "SELECT * FROM background_task b WHERE status = 'WAITING' "
                    f" AND run_at <= :due AND {where} ORDER BY run_at LIMIT 1"
                ),
                {**params, "due": now - OVERDUE_AFTER},
            )
        ).first()
        teams = await _backlog(conn, where, params)
    kinds = [found.get(k.value) or KindCounts(k.value) for k in TaskKind if k != TaskKind.NOOP]
    if TaskKind.NOOP in found:
        kinds.append(found[TaskKind.NOOP])
    return Overview(
        now,
        kinds,
        hour,
        day,
        latency,
        lateness,
        BackgroundTask(**oldest._mapping) if oldest else None,
        teams,
    )


async def _backlog(
    conn: AsyncConnection, where: str, params: dict[str, object]
) -> list[TeamBacklog]:
    """Per team and lane, the teams with the most due work first (one statement)."""
    rows = await conn.execute(
        sa.text(
            f"SELECT b.team_id, t.name AS team, {lane_sql('b.kind')} AS lane, "
            " count(*) FILTER (WHERE b.status = 'WAITING' AND b.run_at <= :now) AS due, "
            " count(*) FILTER (WHERE b.status = 'RUNNING') AS running, "
            " min(b.run_at) FILTER (WHERE b.status = 'WAITING' AND b.run_at <= :now) AS oldest "
            "FROM background_task b LEFT JOIN team t ON t.id = b.team_id "
            f"WHERE b.status IN ('WAITING', 'RUNNING') AND {where} "
            "GROUP BY b.team_id, t.name, 3 "
            "HAVING count(*) FILTER (WHERE b.status = 'WAITING' AND b.run_at <= :now) > 0 "
            " OR count(*) FILTER (WHERE b.status = 'RUNNING') > 0 "
            "ORDER BY due DESC, oldest, b.team_id LIMIT :lim"
        ),
        {**params, "lim": BACKLOG_TEAMS},
    )
    return [TeamBacklog(r.team_id, r.team, r.lane, r.due, r.running, r.oldest) for r in rows]


async def _series(
    conn: AsyncConnection,
    where: str,
    params: dict[str, object],
    now: datetime,
    *,
    minutes: int,
    buckets: int,
) -> Series:
    """Finished tasks per bucket of `minutes`, ending with the bucket that holds `now`."""
    step = timedelta(minutes=minutes)
    end = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - step * buckets
    rows = await conn.execute(
        sa.text(
            "SELECT floor(extract(epoch FROM finished_at - :start) / :step)::int AS i, "
            " count(*) FILTER (WHERE status = 'COMPLETED') c, "
            " count(*) FILTER (WHERE status = 'FAILED') f "
            "FROM background_task b WHERE finished_at >= :start AND finished_at < :end "
            f" AND {where} GROUP BY 1"
        ),
        {**params, "start": start, "end": end, "step": step.total_seconds()},
    )
    completed, failed = [0] * buckets, [0] * buckets
    for r in rows:
        if 0 <= r.i < buckets:
            completed[r.i], failed[r.i] = r.c, r.f
    return Series(minutes, completed, failed)


# The day chart reads every task finished in the last day (~0.6 s at 700k rows here), so it is
# computed at most once a minute per scope and database; the counts and the hour chart stay live.
_DAY_CACHE: dict[tuple[object, ...], Series] = {}


async def _day_series(
    rt: Runtime,
    scope: Scope,
    conn: AsyncConnection,
    where: str,
    params: dict[str, object],
    now: datetime,
) -> Series:
    key = (
        rt.settings.database_url,
        scope.operator,
        scope.team_ids,
        now.replace(second=0, microsecond=0),
    )
    cached = _DAY_CACHE.get(key)
    if cached is None:
        cached = await _series(conn, where, params, now, minutes=15, buckets=96)
        if len(_DAY_CACHE) > 256:
            _DAY_CACHE.clear()
        _DAY_CACHE[key] = cached
    return cached


async def _latencies(
    conn: AsyncConnection, where: str, params: dict[str, object]
) -> tuple[Percentiles, Percentiles]:
    """Seconds from due (accepted, or the retry's time) to RUNNING, over starts in the last
    hour; reminders separately, as their lateness."""
    rows = await conn.execute(
        sa.text(
            "SELECT kind = 'REMINDER' AS reminder, count(*) n, "
            " percentile_cont(0.5) WITHIN GROUP (ORDER BY d) p50, "
            " percentile_cont(0.95) WITHIN GROUP (ORDER BY d) p95 FROM ("
            "  SELECT kind, greatest(0, extract(epoch FROM started_at - run_at)) d "
            "  FROM background_task b WHERE (status = 'RUNNING' OR finished_at >= :hour) "
            f"   AND started_at >= :hour AND {where}) s GROUP BY 1"
        ),
        params,
    )
    got = {r.reminder: Percentiles(r.p50, r.p95, r.n) for r in rows}
    empty = Percentiles(None, None, 0)
    return got.get(False, empty), got.get(True, empty)


# --- the task search ------------------------------------------------------------------------

PAGE = 50


@dataclass(frozen=True)
class Filters:
    kind: str = ""
    status: str = ""
    team_id: int | None = None
    person: str = ""  # part of the owner's e-mail or name
    since: datetime | None = None
    until: datetime | None = None
    error: str = ""  # part of the last error

    def query(self) -> dict[str, str]:
        """The filters as URL parameters (for links and the polling URL)."""
        out = {
            "kind": self.kind,
            "status": self.status,
            "team": str(self.team_id or ""),
            "person": self.person,
            "since": self.since.strftime("%Y-%m-%dT%H:%M") if self.since else "",
            "until": self.until.strftime("%Y-%m-%dT%H:%M") if self.until else "",
            "error": self.error,
        }
        return {k: v for k, v in out.items() if v}


def parse_filters(raw: dict[str, str], tz: tzinfo | None = None) -> Filters:
    """Form input → Filters; a bad value is a ValidationProblem naming the field."""
    kind = raw.get("kind", "").strip().upper()
    if kind and kind not in {k.value for k in TaskKind}:
        raise ValidationProblem("kind", f"use one of {', '.join(k.value for k in TaskKind)}")
    status = raw.get("status", "").strip().upper()
    if status and status not in {s.value for s in TaskStatus}:
        raise ValidationProblem("status", f"use one of {', '.join(s.value for s in TaskStatus)}")
    team = raw.get("team", "").strip()
    # Strict digits in int4 range: `²` passes isdigit() and a 5,000-digit id overflows SQL.
    if team and inputs.optional_id(team) is None:
        raise ValidationProblem("team", "pick a team from the list")
    return Filters(
        kind=kind,
        status=status,
        team_id=int(team) if team else None,
        person=_search_text("person", raw),
        since=_when(raw.get("since", ""), "since", tz),
        until=_when(raw.get("until", ""), "until", tz),
        error=_search_text("error", raw),
    )


def _search_text(name: str, raw: dict[str, str]) -> str:
    # PostgreSQL refuses NUL in text: a bad character is the field's problem, not a 500.
    return inputs.text(name, raw.get(name, "").strip()[:200], max_len=200)


def _when(value: str, name: str, tz: tzinfo | None) -> datetime | None:
    value = value.strip()
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationProblem(name, "use a date and time like 2026-11-30T14:00") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=tz or UTC)  # a time typed in the viewer's zone
    return parsed


Found = (
    OpsRow  # a task with its team's name and owner's e-mail (desk.console.task_admin.rows_where)
)


async def search(
    rt: Runtime, scope: Scope, f: Filters, *, before: int | None = None, limit: int = PAGE
) -> list[Found]:
    """Newest first, `limit` rows with id < `before`."""
    where, params = scope.sql()
    clauses = [where]
    checks: list[tuple[object, str, str, object]] = [
        (f.kind, "b.kind = :kind", "kind", f.kind),
        (f.status, "b.status = :status", "status", f.status),
        (f.team_id, "b.team_id = :team", "team", f.team_id),
        (f.since, "b.created_at >= :since", "since", f.since),
        (f.until, "b.created_at < :until", "until", f.until),
        (before, "b.id < :before", "before", before),
        (
            f.error,  # "IS NOT NULL" lets the partial index of errored tasks serve it
            "b.last_error IS NOT NULL AND b.last_error ILIKE :error",
            "error",
            f"%{_like(f.error)}%",
        ),
        (
            f.person,
            "(u.email ILIKE :person OR u.display_name ILIKE :person)",
            "person",
            f"%{_like(f.person)}%",
        ),
    ]
    for present, clause, name, value in checks:
        if present:
            clauses.append(clause)
            params[name] = value
    params["lim"] = limit
    return await task_admin.rows_where(rt, clauses, params)


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def teams(rt: Runtime, scope: Scope) -> list[tuple[int, str]]:
    """The teams the viewer may filter by."""
    where, params = scope.sql("id")
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text(f"SELECT id, name FROM team WHERE {where} ORDER BY name LIMIT 500"), params
        )
        return [(r.id, r.name) for r in rows]


async def task_in_scope(rt: Runtime, scope: Scope, task_id: int) -> Found:
    """One task with its team and owner; NotFound when missing or outside the scope."""
    where, params = scope.sql()
    async with rt.engine.connect() as conn:
        row = (
            await conn.execute(
                sa.text(
                    # LEFT: an e-mail may have no team or owner (desk/work/mail.py).
                    "SELECT b.*, coalesce(t.name, '') AS team_name, "
                    " coalesce(u.email, '') AS owner_email FROM background_task b "
                    "LEFT JOIN team t ON t.id = b.team_id "
                    f"LEFT JOIN app_user u ON u.id = b.owner_id WHERE b.id = :id AND {where}"
                ),
                {**params, "id": task_id},
            )
        ).first()
    if row is None:
        raise NotFound()  # outside the scope reads exactly like an unknown address
    data = dict(row._mapping)
    team, owner = data.pop("team_name"), data.pop("owner_email")
    return Found(BackgroundTask(**data), team, owner)
