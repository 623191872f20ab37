"""The accept statement of the ledger: every task a person starts (an export, an import, a
reminder) is inserted by `ACCEPT`, which checks membership, the assignee, the scope's one active
task and the owner's quota in the same statement; an export runs it under a lock of its owner
only. The idempotency keys of every accept path are kept here too.

Why not the team's lock: quotas are per person, and one active task per scope is the partial
unique index's job, so two staff of one team never need to wait for each other (with the team
lock, 16 people's exports queued behind one another). The lock of (team, person) keeps
one person's quota exact under concurrency: the count and the insert run in one statement,
after the lock, so its snapshot sees every earlier accept of that person.

Without an idempotency key an accept is one round trip (`accept_at_once`): BEGIN, the lock, the
statement and COMMIT sent as one simple query. PostgreSQL runs them in order and, in READ
COMMITTED, takes the statement's snapshot when the statement starts, i.e. after the lock is
granted, exactly as when they come one by one; the lock waits in the server, not in a client
loop. With a key: BEGIN, the key's lock and checks, the person's lock, the statement, COMMIT.
The statement inserts only when everything allows it and reports what it found (membership,
the assignee, an active task in the scope, the quota counts), so the caller can say why not.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import AsyncClientCursor, AsyncConnection
from psycopg.rows import dict_row

from desk.core import locks, metrics
from desk.core.errors import (
    IdempotencyKeyReused,
    NotFound,
    QuotaExceeded,
    Unauthenticated,
    ValidationProblem,
)
from desk.core.messages import message
from desk.core.models import BackgroundTask
from desk.core.pg import Pg
from desk.ledger.accept import ACTIVE as _ACTIVE
from desk.ledger.accept import NewTask, as_task
from desk.ledger.lanes import lane_of
from desk.ledger.sql import Db, execute, one

IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9_.:-]{8,100}$")

LOCK_PERSON = f"SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, {locks.PERSON_ACCEPT}))"
LOCK_KEY = f"SELECT pg_advisory_xact_lock({locks.IDEMPOTENCY_KEY}, hashtext(%(k)s))"
BY_KEY = "SELECT * FROM background_task WHERE owner_id = %(o)s AND idempotency_key = %(k)s"
FORGET_KEY = (
    "UPDATE background_task SET idempotency_key = NULL "
    "WHERE id = %(id)s AND idempotency_key = %(k)s"
)

_SEND = "(%(dispatched)s AND NOT EXISTS (SELECT 1 FROM task_lane WHERE name = %(lane)s AND paused))"
# The caller's session is live (or none was named: the caller was identified by reading it).
LIVE = (
    "(%(session)s::text IS NULL OR EXISTS (SELECT 1 FROM web_session WHERE id = %(session)s "
    " AND user_id = %(owner_id)s AND revoked_at IS NULL AND expires_at > %(now)s))"
)
LIVE_SESSION = f"SELECT {LIVE} AS live"
# m: the owner's role; a: the named assignee is staff; c: an active task in the scope;
# q: the owner's quota counts, two counts each on its index (the active ones on the partial
# unique index, the last hour's on migration 0017's: one count with an OR read the person's whole
# history); s: the caller's session is live, when the caller was named from memory (web.auth,
# `session` set). The insert happens only when all of them allow it.
ACCEPT = f"""
WITH m AS (SELECT role FROM membership WHERE user_id = %(owner_id)s AND team_id = %(team_id)s),
s AS (SELECT {LIVE} AS live),
a AS (
  SELECT 1 FROM membership WHERE user_id = %(assignee)s::int AND team_id = %(team_id)s
   AND role IN ('ADMIN', 'STAFF')
),
c AS (
  SELECT id FROM background_task
  WHERE kind = %(kind)s AND team_id = %(team_id)s AND scope_key = %(scope_key)s AND {_ACTIVE}
  LIMIT 1
),
q AS (
  SELECT (SELECT count(*) FROM background_task WHERE kind = %(kind)s AND team_id = %(team_id)s
    AND owner_id = %(owner_id)s AND {_ACTIVE}) AS q_active, r.*
  FROM (SELECT count(*) AS q_recent, min(created_at) AS q_oldest FROM background_task
   WHERE team_id = %(team_id)s AND owner_id = %(owner_id)s AND kind = %(kind)s
    AND created_at >= %(since)s::timestamptz) r
),
ins AS (
  INSERT INTO background_task (kind, team_id, owner_id, ticket_id, scope_key, filters,
   scope_creator_id, reminder_revision, note, run_at, max_attempts, dispatched_at, sends,
   created_at, updated_at, idempotency_key, request_fingerprint)
  SELECT %(kind)s::text, %(team_id)s::int, %(owner_id)s::int, %(ticket_id)s::int,
   %(scope_key)s::text, %(filters)s::jsonb,
   CASE WHEN m.role IN ('ADMIN', 'STAFF') THEN NULL ELSE %(owner_id)s::int END,
   %(reminder_revision)s::int, %(note)s::text, %(run_at)s::timestamptz, %(max_attempts)s::int,
   CASE WHEN {_SEND} THEN %(now)s::timestamptz END, CASE WHEN {_SEND} THEN 1 ELSE 0 END,
   %(now)s::timestamptz, %(now)s::timestamptz, %(idem)s::text, %(fingerprint)s::text
  FROM m, q, s
  WHERE s.live AND (%(assignee)s::int IS NULL OR EXISTS (SELECT 1 FROM a))
   AND NOT EXISTS (SELECT 1 FROM c)
   AND q.q_active < %(max_active)s AND q.q_recent < %(max_recent)s
  ON CONFLICT (kind, team_id, scope_key) WHERE {_ACTIVE} DO NOTHING
  RETURNING *
)
SELECT (SELECT live FROM s) AS q_live, (SELECT role FROM m) AS q_role,
 EXISTS (SELECT 1 FROM a) AS q_assignee_ok,
 (SELECT id FROM c) AS q_conflict, q.*, ins.*
FROM q LEFT JOIN ins ON true
"""


# A NOOP (benchmarks, tests): the membership check and the insert in one statement; no lock
# (no quota, and its scope is unique), so one accept is one round trip on `rt.pg`.
ACCEPT_NOOP = f"""
INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, max_attempts,
 dispatched_at, sends, created_at, updated_at)
SELECT 'NOOP', %(team_id)s::int, %(owner_id)s::int, %(scope_key)s::text, %(filters)s::jsonb,
 %(run_at)s::timestamptz, %(max_attempts)s::int,
 CASE WHEN {_SEND} THEN %(now)s::timestamptz END, CASE WHEN {_SEND} THEN 1 ELSE 0 END,
 %(now)s::timestamptz, %(now)s::timestamptz
WHERE EXISTS (SELECT 1 FROM membership WHERE user_id = %(owner_id)s AND team_id = %(team_id)s)
RETURNING *
"""


@dataclass(frozen=True)
class Quota:
    max_active: int
    max_recent: int
    since: datetime

    @classmethod
    def none(cls, now: datetime) -> Quota:
        """No quota (imports, reminders: one active task per scope is their only limit)."""
        return cls(2**62, 2**62, now)


@dataclass(frozen=True)
class Outcome:
    """What the accept statement found; `task` is set when it inserted one."""

    live: bool  # the caller's session (checked when named from memory) is live
    role: str | None
    assignee_ok: bool
    conflict_id: int | None
    active: int
    recent: int
    oldest: datetime | None
    task: BackgroundTask | None


async def lock_person(db: Db, team_id: int, owner_id: int) -> None:
    """Serialise one person's accepts in one team (their quotas); others never wait for it."""
    await execute(db, LOCK_PERSON, {"lock": f"accept:{team_id}:{owner_id}"})


@asynccontextmanager
async def transaction(conn: AsyncConnection[Any]) -> AsyncIterator[None]:
    """A transaction on an autocommit connection, committed at the end, rolled back on any
    exception (simple BEGIN/COMMIT: no savepoint bookkeeping of psycopg's `transaction()`)."""
    await conn.execute(b"BEGIN", prepare=False)
    try:
        yield
    except BaseException:
        await _rollback(conn)
        raise
    await conn.execute(b"COMMIT", prepare=False)


async def lock_key(db: Db, owner_id: int, key: str) -> None:
    """Serialise two requests carrying one idempotency key (they may name different teams)."""
    await execute(db, LOCK_KEY, {"k": f"{owner_id}:{key}"})


async def live_session(db: Db, session: str | None, owner_id: int, now: datetime) -> None:
    """Raise Unauthenticated unless `session` (a caller named from memory) is still the owner's
    live session; None: nothing to check."""
    if session is None:
        return
    found = await one(db, LIVE_SESSION, {"session": session, "owner_id": owner_id, "now": now})
    if not found or not found["live"]:
        raise Unauthenticated()


async def by_key(db: Db, owner_id: int, key: str) -> BackgroundTask | None:
    row = await one(db, BY_KEY, {"o": owner_id, "k": key})
    return as_task(row) if row else None


async def forget_key(db: Db, task_id: int, key: str) -> None:
    """A key older than the window is free again: its old task lets go of it."""
    await execute(db, FORGET_KEY, {"id": task_id, "k": key})


def _accept_params(
    new: NewTask,
    quota: Quota,
    now: datetime,
    dispatched: bool,
    assignee_id: int | None,
    session: str | None,
) -> dict[str, Any]:
    return {
        "kind": new.kind, "team_id": new.team_id, "owner_id": new.owner_id,
        "ticket_id": new.ticket_id, "scope_key": new.scope_key,
        "filters": json.dumps(new.filters or {}), "reminder_revision": new.reminder_revision,
        "note": new.note, "run_at": new.run_at, "max_attempts": new.max_attempts,
        "dispatched": dispatched, "lane": lane_of(new.kind), "now": now,
        "idem": new.idempotency_key, "fingerprint": new.request_fingerprint,
        "assignee": assignee_id, "since": quota.since,
        "max_active": quota.max_active, "max_recent": quota.max_recent, "session": session,
    }  # fmt: skip


def _outcome(row: dict[str, Any] | None) -> Outcome:
    assert row is not None  # q always yields one row
    found = {k: row.pop(k) for k in [k for k in row if k.startswith("q_")]}
    task = as_task(row) if row.get("id") is not None else None
    return Outcome(
        live=bool(found["q_live"]),
        role=found["q_role"],
        assignee_ok=bool(found["q_assignee_ok"]),
        conflict_id=found["q_conflict"],
        active=int(found["q_active"]),
        recent=int(found["q_recent"]),
        oldest=found["q_oldest"],
        task=metrics.accepted(task),
    )


async def accept(
    db: Db,
    new: NewTask,
    quota: Quota,
    *,
    now: datetime,
    dispatched: bool,
    assignee_id: int | None = None,
    session: str | None = None,
) -> Outcome:
    """Insert `new` WAITING if `session` (when given) is the owner's live session, the owner is a
    member, `assignee_id` (if any) is staff, no active
    task holds the scope and the quota allows it; in any case, report what was found. Runs in
    the caller's transaction, which holds the owner's lock (an export) or the lock that
    serialises its scope (an import's team, a reminder's ticket)."""
    params = _accept_params(new, quota, now, dispatched, assignee_id, session)
    return _outcome(await one(db, ACCEPT, params))


# The accept statement prepared once per connection under this name (SQL-level PREPARE, so a
# simple query can EXECUTE it: the server neither parses nor plans it again; psycopg's own
# prepared statements are protocol-level and cannot join a multi-statement query).
PREPARED = "taskdesk_accept_v3"
_ARGS = (
    ("kind", "text"), ("team_id", "int"), ("owner_id", "int"), ("ticket_id", "int"),
    ("scope_key", "text"), ("filters", "jsonb"), ("reminder_revision", "int"), ("note", "text"),
    ("run_at", "timestamptz"), ("max_attempts", "int"), ("dispatched", "boolean"),
    ("lane", "text"), ("now", "timestamptz"), ("idem", "text"), ("fingerprint", "text"),
    ("assignee", "int"), ("since", "timestamptz"), ("max_active", "bigint"),
    ("max_recent", "bigint"), ("session", "text"),
)  # fmt: skip


def _prepare_sql() -> str:
    sql = ACCEPT
    for i, (name, _) in enumerate(_ARGS, 1):
        sql = sql.replace(f"%({name})s", f"${i}")
    assert "%(" not in sql, "every parameter of ACCEPT must be in _ARGS"
    return f"PREPARE {PREPARED} ({', '.join(t for _, t in _ARGS)}) AS {sql}"


PREPARE_ACCEPT = _prepare_sql()
# BEGIN, the person's lock (LOCK_PERSON's text, built in SQL from the two ids), the accept and
# COMMIT: one simple query, one round trip.
_BEGIN_AND_LOCK = (
    "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended("
    f"'accept:' || %(team_id)s::int || ':' || %(owner_id)s::int, {locks.PERSON_ACCEPT})); "
)
ACCEPT_AT_ONCE = (
    _BEGIN_AND_LOCK + f"EXECUTE {PREPARED} ({', '.join(f'%({n})s' for n, _ in _ARGS)}); COMMIT"
)
# Through a transaction pooler (the connection's `prepare_threshold` is None, desk/core/db.py
# `connect_args`) the statement itself: a prepared one lives on one server connection, and the
# next transaction may run on another that never saw it.
ACCEPT_AT_ONCE_UNPREPARED = _BEGIN_AND_LOCK + ACCEPT.strip() + "; COMMIT"
_prepared: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()


async def accept_at_once(
    conn: AsyncConnection[Any],
    new: NewTask,
    quota: Quota,
    *,
    now: datetime,
    dispatched: bool,
    assignee_id: int | None = None,
    session: str | None = None,
) -> Outcome:
    """`accept` in its own transaction under the owner's lock, committed: one round trip on an
    autocommit connection with no transaction open (plus the PREPARE on a connection's first
    use). The values are bound client-side (psycopg's quoting, by type)."""
    params = _accept_params(new, quota, now, dispatched, assignee_id, session)
    pooled = conn.prepare_threshold is None
    for _ in range(2):
        if not pooled:
            await _prepare(conn)
        cursor = AsyncClientCursor(conn, row_factory=dict_row)
        try:
            sql = ACCEPT_AT_ONCE_UNPREPARED if pooled else ACCEPT_AT_ONCE
            await cursor.execute(sql, params, prepare=False)
        except psycopg.errors.InvalidSqlStatementName:  # gone (DISCARD ALL): prepare again
            _prepared.discard(conn)
            await _rollback(conn)
            continue
        except BaseException:
            await _rollback(conn)
            raise
        cursor.nextset()  # past BEGIN
        cursor.nextset()  # past the lock
        return _outcome(await cursor.fetchone())
    raise RuntimeError("the accept statement could not be prepared")  # pragma: no cover


async def _prepare(conn: AsyncConnection[Any]) -> None:
    if conn in _prepared:
        return
    with suppress(psycopg.errors.DuplicatePreparedStatement):
        await conn.execute(PREPARE_ACCEPT.encode(), prepare=False)
    _prepared.add(conn)


async def _rollback(conn: AsyncConnection[Any]) -> None:
    """End a transaction an error aborted; a broken connection is discarded by the pool."""
    with suppress(Exception):
        await conn.execute(b"ROLLBACK", prepare=False)


async def accept_noop(
    pg: Pg, new: NewTask, *, now: datetime, dispatched: bool
) -> BackgroundTask | None:
    """Insert the NOOP `new` WAITING if its owner is a member of its team, else None."""
    params = {
        "team_id": new.team_id, "owner_id": new.owner_id, "scope_key": new.scope_key,
        "filters": json.dumps(new.filters or {}), "run_at": new.run_at,
        "max_attempts": new.max_attempts, "dispatched": dispatched, "lane": lane_of(new.kind),
        "now": now,
    }  # fmt: skip
    found = await pg.write(ACCEPT_NOOP, params)
    return metrics.accepted(as_task(found[0])) if found else None


# --- idempotency keys (every accept path) -----------------------------------------------------


def check_key(key: str) -> None:
    if not IDEMPOTENCY_KEY.match(key):
        raise ValidationProblem(
            "idempotency_key", "8 to 100 letters, digits or _ . : - (a UUID is a good key)"
        )


def key_expired(found: BackgroundTask, now: datetime, window_seconds: float) -> bool:
    """The key's task is older than IDEMPOTENCY_WINDOW_SECONDS: the key is free again."""
    return found.created_at <= now - timedelta(seconds=window_seconds)


async def replay(
    db: Db,
    owner_id: int,
    key: str,
    fingerprint: str,
    *,
    now: datetime,
    window: float,
) -> BackgroundTask | None:
    """The task `key` already made within the window (whatever its state now), or None: go on.

    Holds the key's lock until the caller's transaction ends, so two requests with one key
    create one task. The same key with another request is IdempotencyKeyReused."""
    check_key(key)
    await lock_key(db, owner_id, key)
    found = await by_key(db, owner_id, key)
    if found is None:
        return None
    if key_expired(found, now, window):
        await forget_key(db, found.id or 0, key)
        return None
    if found.request_fingerprint != fingerprint:
        raise IdempotencyKeyReused()
    return found


def refuse(got: Outcome, quota: Quota, now: datetime, assignee: int | None) -> None:
    """Why the statement inserted nothing, in the order the checks were always made (returns
    when an active task holds the scope: the caller reads it for the TaskConflict)."""
    if not got.live:
        raise Unauthenticated()
    if got.role is None:
        raise NotFound("Team not found.")
    if assignee is not None and not got.assignee_ok:
        raise ValidationProblem("assignee_id", "not a staff member of this team")
    if got.conflict_id is not None:
        return
    if got.active >= quota.max_active:
        raise QuotaExceeded(
            now + timedelta(seconds=30), message("quota.active_exports", active=got.active)
        )
    if got.recent >= quota.max_recent and got.oldest is not None:
        retry_after = got.oldest + timedelta(hours=1)
        raise QuotaExceeded(
            retry_after,
            message("quota.exports_per_hour", limit=quota.max_recent, retry_at=retry_after),
        )
