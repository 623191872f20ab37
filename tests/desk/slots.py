"""Looking at the export build slots (desk.work.exports.build_slot) from outside: which are
held, who waits for one, and another session holding some, as another worker's builds would."""

from __future__ import annotations

import psycopg

from desk.core.settings import Settings
from desk.work import exports

_HERE = "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
_OURS = f"locktype = 'advisory' AND classid = {exports.SLOT_LOCK} AND {_HERE}"
_SLOTS = f"""SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
    FROM pg_locks WHERE {_OURS}"""
# Writers waiting for a slot: in the queue (first in line holds the queue lock, the others wait
# for it), or, as a wait on one chosen slot would, waiting for a slot lock.
_WAITERS = f"""SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND {_HERE} AND (
    (classid = {exports.QUEUE_LOCK} AND mode = 'ExclusiveLock')
    OR (classid = {exports.SLOT_LOCK} AND NOT granted))"""
_QUEUED_ON = f"SELECT objid FROM pg_locks WHERE {_OURS} AND NOT granted"


async def _rows(settings: Settings, sql: str) -> list[tuple[int, ...]]:
    async with await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True) as c:
        return [tuple(int(v) for v in r) for r in await (await c.execute(sql)).fetchall()]


async def slots(settings: Settings) -> tuple[int, int]:
    """(slots held, slot locks waited for)."""
    held, waiting = (await _rows(settings, _SLOTS))[0]
    return held, waiting


async def waiters(settings: Settings) -> int:
    return (await _rows(settings, _WAITERS))[0][0]


async def waiting(settings: Settings) -> bool:
    return await waiters(settings) > 0


async def queued_on(settings: Settings) -> set[int]:
    """The slots a writer waits for by number (none: waiters take whichever frees first)."""
    return {r[0] for r in await _rows(settings, _QUEUED_ON)}


async def hold(settings: Settings, held: range) -> psycopg.AsyncConnection:
    """Another session holding these slots (as another worker's builds would)."""
    other = await psycopg.AsyncConnection.connect(settings.libpq_url, autocommit=True)
    for s in held:
        await other.execute("SELECT pg_advisory_lock(%s, %s)", (exports.SLOT_LOCK, s))
    return other


_IN_QUEUE = f"""SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted)
    FROM pg_locks WHERE locktype = 'advisory' AND {_HERE} AND classid = {exports.QUEUE_LOCK}
    AND mode = 'ExclusiveLock'"""


async def queue(settings: Settings) -> tuple[int, int]:
    """(writers first in line for a slot, writers waiting behind them)."""
    first, behind = (await _rows(settings, _IN_QUEUE))[0]
    return first, behind
