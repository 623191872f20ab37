"""Demo data (`seed_demo`, idempotent) and large generated data for benchmarks (`seed_bulk`, COPY).

The demo is two teams with known people and passwords: "Acme Support" (admin Zhou, staff Chen,
customers Lin and Wang, ~200 tickets) and "Globex" (~30 tickets) to prove isolation; the tickets
have conversations (desk/seed/threads.py). Acme has an SLA policy (Mon-Fri 09:00-17:00 in
Asia/Shanghai, an urgent ticket answered within an hour) and time rules (resolved → closed after
7 days, pending → the customer reminded after 3, then resolved 4 days later), written through
sla_store and rule_sql as an admin's save would; the scheduler's pass starts the rules' runs.
Every row the demo writes has a natural key (team name, e-mail, membership, ticket
`external_id`, the team of a policy or rules) and is written only when missing, so running it
again changes nothing.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from desk.core.errors import NotFound
from desk.core.models import Priority, Role, TicketStatus
from desk.core.runtime import Runtime
from desk.people.passwords import hash_password
from desk.seed import clocks, threads
from desk.seed.words import make_body, make_title

DEMO_PASSWORD = "taskdesk-demo"
ACME = "Acme Support"
GLOBEX = "Globex"
DEMO_TEAMS = (ACME, GLOBEX)
SEED = 20261129  # fixed: the same demo on every machine

STATUS_WEIGHTS = {
    TicketStatus.OPEN: 40,
    TicketStatus.PENDING: 20,
    TicketStatus.RESOLVED: 25,
    TicketStatus.CLOSED: 15,
}
PRIORITY_WEIGHTS = {Priority.LOW: 20, Priority.NORMAL: 50, Priority.HIGH: 22, Priority.URGENT: 8}


@dataclass(frozen=True)
class DemoUser:
    key: str
    email: str
    display_name: str
    team: str
    role: Role
    timezone: str
    locale: str


DEMO_USERS = (
    DemoUser("zhou", "zhou@acme.test", "Zhou Wei", ACME, Role.ADMIN, "Asia/Shanghai", "zh-CN"),
    DemoUser("chen", "chen@acme.test", "Chen Jing", ACME, Role.STAFF, "Asia/Shanghai", "zh-CN"),
    DemoUser("lin", "lin@acme.test", "Lin Yu", ACME, Role.CUSTOMER, "Asia/Taipei", "en"),
    DemoUser("wang", "wang@acme.test", "Wang Fang", ACME, Role.CUSTOMER, "Europe/Berlin", "en"),
    DemoUser("ada", "ada@globex.test", "Ada Novak", GLOBEX, Role.ADMIN, "Europe/London", "en"),
    DemoUser("ben", "ben@globex.test", "Ben Okafor", GLOBEX, Role.STAFF, "America/New_York", "en"),
    DemoUser("cleo", "cleo@globex.test", "Cleo Park", GLOBEX, Role.CUSTOMER, "UTC", "en"),
)

# (email, password, role, team) for `taskdesk dev` to print.
DEMO_LOGINS = tuple((u.email, DEMO_PASSWORD, u.role.value, u.team) for u in DEMO_USERS)


@dataclass(frozen=True)
class TeamPlan:
    """How a demo team's tickets are drawn: who writes them, who works on them."""

    name: str
    slug: str
    tickets: int
    creators: dict[str, int]  # user key -> weight
    assignees: dict[str | None, int]  # None = unassigned


TEAM_PLANS = (
    TeamPlan(ACME, "acme", 200, {"lin": 45, "wang": 40, "chen": 8, "zhou": 7},
             {"chen": 45, "zhou": 20, None: 35}),
    TeamPlan(GLOBEX, "globex", 30, {"cleo": 80, "ben": 10, "ada": 10},
             {"ben": 50, "ada": 20, None: 30}),
)  # fmt: skip


@dataclass(frozen=True)
class SeedReport:
    """How many rows this run created (all zero when the demo was already there)."""

    teams: int
    users: int
    memberships: int
    tickets: int
    messages: int = 0
    clocks: int = 0  # SLA policies and time rules written


def _pick(rng: random.Random, weights: dict[Any, int]) -> Any:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


async def _ensure_teams(conn: AsyncConnection) -> tuple[dict[str, int], int]:
    names = [p.name for p in TEAM_PLANS]
    created = await conn.execute(
        sa.text(
            "INSERT INTO team (name) SELECT unnest(CAST(:names AS text[])) "
            "ON CONFLICT (name) DO NOTHING RETURNING id"
        ),
        {"names": names},
    )
    count = len(created.all())
    rows = await conn.execute(
        sa.text("SELECT name, id FROM team WHERE name = ANY(:names)"), {"names": names}
    )
    return {r.name: int(r.id) for r in rows}, count


async def _ensure_users(conn: AsyncConnection) -> tuple[dict[str, int], int]:
    """Insert missing demo users; a present one is left as it is (its password included)."""
    emails = [u.email for u in DEMO_USERS]
    found = await conn.execute(
        sa.text("SELECT lower(email) AS email FROM app_user WHERE lower(email) = ANY(:e)"),
        {"e": emails},
    )
    present = {r.email for r in found}
    missing = [u for u in DEMO_USERS if u.email not in present]
    if missing:
        # argon2 is deliberately slow: hash once, off the event loop.
        hashed = await asyncio.to_thread(hash_password, DEMO_PASSWORD)
        await conn.execute(
            sa.text(
                "INSERT INTO app_user (email, display_name, password_hash, locale, timezone) "
                "VALUES (:email, :name, :hash, :locale, :tz) ON CONFLICT DO NOTHING"
            ),
            [
                {"email": u.email, "name": u.display_name, "hash": hashed,
                 "locale": u.locale, "tz": u.timezone}
                for u in missing
            ],
        )  # fmt: skip
    rows = await conn.execute(
        sa.text("SELECT lower(email) AS email, id FROM app_user WHERE lower(email) = ANY(:e)"),
        {"e": emails},
    )
    by_email = {r.email: int(r.id) for r in rows}
    return {u.key: by_email[u.email] for u in DEMO_USERS}, len(missing)


async def _ensure_memberships(
    conn: AsyncConnection, teams: dict[str, int], users: dict[str, int]
) -> int:
    result = await conn.execute(
        sa.text(
            "INSERT INTO membership (user_id, team_id, role) "
            "SELECT * FROM unnest(CAST(:u AS int[]), CAST(:t AS int[]), CAST(:r AS text[])) "
            "ON CONFLICT (user_id, team_id) DO NOTHING RETURNING user_id"
        ),
        {
            "u": [users[d.key] for d in DEMO_USERS],
            "t": [teams[d.team] for d in DEMO_USERS],
            "r": [d.role.value for d in DEMO_USERS],
        },
    )
    return len(result.all())


def demo_tickets(
    plan: TeamPlan, team_id: int, users: dict[str, int], now: datetime
) -> list[dict[str, Any]]:
    """The team's demo tickets, the same on every run (fixed seed; times relative to `now`)."""
    rng = random.Random(f"{SEED}:{plan.slug}")
    since_rng = random.Random(f"{SEED}:{plan.slug}:since")  # its own: the rest stays as it was
    out = []
    for i in range(1, plan.tickets + 1):
        status = _pick(rng, STATUS_WEIGHTS)
        assignee = _pick(rng, plan.assignees)
        created = now - timedelta(minutes=rng.randint(5, 90 * 24 * 60))
        age = now - created
        touched = timedelta(0) if status is TicketStatus.OPEN else rng.random() * age
        out.append(
            {
                "team": team_id,
                "title": make_title(rng),
                "body": make_body(rng),
                "status": status.value,
                "priority": _pick(rng, PRIORITY_WEIGHTS).value,
                "creator": users[_pick(rng, plan.creators)],
                "assignee": users[assignee] if assignee else None,
                "external_id": f"demo-{plan.slug}-{i:04d}",
                "created": created,
                "updated": created + touched,
                "since": _status_since(since_rng, status, created, created + touched, now),
            }
        )
    return out


# How long ago a demo ticket entered its status, in days: a few resolved and pending tickets
# are past the demo's time rules (7 and 3 days) when `dev` starts, so its first run has tickets
# to show; the others come due over the following days, not all in the first minute.
SINCE_DAYS = {TicketStatus.RESOLVED: (0.2, 8.0), TicketStatus.PENDING: (0.1, 3.5)}


def _status_since(
    rng: random.Random, status: TicketStatus, created: datetime, updated: datetime, now: datetime
) -> datetime:
    low, high = SINCE_DAYS.get(status, (0.0, 0.0))
    if high == 0.0:
        return created if status is TicketStatus.OPEN else updated
    return max(created, now - timedelta(days=rng.uniform(low, high)))


async def _ensure_tickets(
    conn: AsyncConnection, teams: dict[str, int], users: dict[str, int], now: datetime
) -> int:
    created = 0
    for plan in TEAM_PLANS:
        rows = demo_tickets(plan, teams[plan.name], users, now)
        result = await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, body, status, priority, creator_id, "
                "assignee_id, external_id, created_at, updated_at, status_since) "
                "VALUES (:team, :title, :body, :status, :priority, :creator, :assignee, "
                ":external_id, :created, :updated, :since) "
                "ON CONFLICT (team_id, external_id) DO NOTHING"
            ),
            rows,
        )
        created += max(result.rowcount, 0)
    return created


async def seed_demo(rt: Runtime) -> SeedReport:
    """Create the demo teams, people and tickets that are missing; one transaction."""
    async with rt.engine.begin() as conn:
        # Two `dev` or `seed` runs at once must not race each other.
        await conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('taskdesk:seed'))"))
        teams, n_teams = await _ensure_teams(conn)
        users, n_users = await _ensure_users(conn)
        n_members = await _ensure_memberships(conn, teams, users)
        n_tickets = await _ensure_tickets(conn, teams, users, rt.clock())
        staff = {
            teams[name]: [users[u.key] for u in DEMO_USERS if u.team == name and u.role is not Role.CUSTOMER]
            for name in DEMO_TEAMS
        }  # fmt: skip
        n_messages = await threads.ensure_threads(conn, staff, str(SEED), rt.clock())
        n_clocks = await clocks.ensure_clocks(conn, teams[ACME], users["zhou"], rt.clock())
    return SeedReport(n_teams, n_users, n_members, n_tickets, n_messages, n_clocks)


# --- Bulk data for benchmarks --------------------------------------------------------------

BULK_COLUMNS = (
    "team_id, title, body, status, priority, creator_id, assignee_id, created_at, updated_at"
)
TITLE_POOL = 50_000  # generated titles; rows pick from them (cheaper than one per row)


@dataclass(frozen=True)
class BulkReport:
    team_id: int
    rows: int
    seconds: float


ProgressFn = Callable[[int, int], None]


async def _team_people(
    conn: psycopg.AsyncConnection[Any], team: str
) -> tuple[int, list[int], list[int]]:
    """(team id, possible creators, possible assignees) — creators prefer the customers."""
    row = await (await conn.execute("SELECT id FROM team WHERE name = %s", (team,))).fetchone()
    if row is None:
        raise NotFound(f"Team {team!r} not found: run `taskdesk seed` first, or create it.")
    team_id = int(row[0])
    members = await (
        await conn.execute("SELECT user_id, role FROM membership WHERE team_id = %s", (team_id,))
    ).fetchall()
    if not members:
        raise NotFound(f"Team {team!r} has no members to create tickets.")
    customers = [int(u) for u, r in members if r == Role.CUSTOMER]
    staff = [int(u) for u, r in members if r != Role.CUSTOMER]
    return team_id, customers or staff, staff


@dataclass(frozen=True)
class _BulkPlan:
    """What every batch of one bulk load shares."""

    team_id: int
    titles: list[str]
    creators: list[int]
    assignees: list[str]  # user ids as text, "\\N" (NULL in COPY text format) for nobody
    start: float  # epoch seconds of the oldest row
    step: float  # seconds between consecutive rows
    seed: int


def _bulk_lines(plan: _BulkPlan, rng: random.Random, first: int, count: int) -> str:
    """Rows `first`..`first+count` in COPY text format; created_at rises with the row number."""
    t = rng.choices(plan.titles, k=count)
    b = rng.choices([make_body(rng) for _ in range(20)], k=count)
    s = rng.choices(list(STATUS_WEIGHTS), weights=list(STATUS_WEIGHTS.values()), k=count)
    p = rng.choices(list(PRIORITY_WEIGHTS), weights=list(PRIORITY_WEIGHTS.values()), k=count)
    c = rng.choices(plan.creators, k=count)
    a = rng.choices(plan.assignees, k=count)
    team, start, step = plan.team_id, plan.start + first * plan.step, plan.step
    lines = []
    for i in range(count):
        ts = datetime.fromtimestamp(start + (i + rng.random()) * step, UTC).isoformat()
        lines.append(f"{team}\t{t[i]}\t{b[i]}\t{s[i]}\t{p[i]}\t{c[i]}\t{a[i]}\t{ts}\t{ts}\n")
    return "".join(lines)


async def _copy_batch(
    conn: psycopg.AsyncConnection[Any], plan: _BulkPlan, first: int, count: int
) -> None:
    """One batch, one transaction. Its own seeded generator keeps the data deterministic
    whichever connection happens to load it."""
    rng = random.Random(f"{plan.seed}:{first}")
    async with (
        conn.transaction(),
        conn.cursor().copy(f"COPY ticket ({BULK_COLUMNS}) FROM STDIN") as copy,
    ):
        # Writes of 10k rows keep memory flat and let the server parse while we generate.
        for offset in range(0, count, 10_000):
            k = min(10_000, count - offset)
            await copy.write(_bulk_lines(plan, rng, first + offset, k))


async def seed_bulk(
    rt: Runtime,
    team: str,
    n: int,
    *,
    batch_rows: int = 100_000,
    connections: int = 2,
    span_days: float = 730.0,
    seed: int = SEED,
    progress: ProgressFn | None = None,
) -> BulkReport:
    """Add `n` generated tickets to `team` with COPY, one transaction per batch.

    Rows spread over the last `span_days`; statuses, priorities, creators (mostly customers) and
    assignees (staff, admins or nobody) vary. Adds rows every time it runs: it is not idempotent.
    Batches go through `connections` connections at once: the server's index maintenance, not
    our row generation, is the bottleneck, so two backends use two cores.
    """
    began = time.perf_counter()
    rng = random.Random(seed)
    url = rt.settings.libpq_url
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        team_id, creators, staff = await _team_people(conn, team)
    plan = _BulkPlan(
        team_id=team_id,
        titles=[make_title(rng) for _ in range(TITLE_POOL)],
        creators=creators,
        # About a third unassigned.
        assignees=[str(u) for u in staff] + ["\\N"] * max(1, len(staff) // 2),
        start=rt.clock().timestamp() - span_days * 86400,
        step=span_days * 86400 / max(n, 1),
        seed=seed,
    )
    batches = [(first, min(batch_rows, n - first)) for first in range(0, n, batch_rows)]
    done = 0

    async def loader() -> None:
        nonlocal done
        # autocommit: each batch is its own real transaction, not a savepoint.
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            while batches:
                first, count = batches.pop(0)
                await _copy_batch(conn, plan, first, count)
                done += count
                if progress:
                    progress(done, n)

    await asyncio.gather(*(loader() for _ in range(max(1, min(connections, len(batches))))))
    # The planner's statistics, now: until autovacuum's next look (up to a minute, longer on a
    # busy server) it plans for the table as it was, e.g. a full scan where the title index
    # serves a filtered export or a search.
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("ANALYZE ticket")
    return BulkReport(team_id, n, time.perf_counter() - began)
