"""The only module that talks to arq/Redis for queueing: messages are `{task_id, run}` in JSON.

Redis only wakes workers; the ledger decides what runs. Every call here is best effort from the
ledger's point of view: a message that is lost is sent again by the dispatcher, so failures are
logged and reported, never raised into a request.

Sends go through one Lua script (one round trip for a whole sweep's messages). It writes jobs exactly as
arq's `ArqRedis.enqueue_job` does (the job key with arq's own serialisation, an entry in the
lane's sorted set scored by the due time) and, like arq, refuses an id it still knows (a job,
result or in-progress key): a refused send is not a send. Each send's job id is new
(`{prefix}:task:{id}:{run}:{send}`), and a re-send removes what the previous send of the task
left (its queue entry, job, in-progress and retry keys), whatever state it was in.

This module is the adapter for the libraries' private parts the queue leans on
(docs/architecture.md, "Adapters"): arq's job format and key layout, written by hand in Lua, and
redis-py's connection internals, read by the pool. pyproject.toml pins arq, redis and hiredis
exactly, and tests/desk/adapters/ fail when any of them changes shape; each shortcut names what
would let it go.

The epoch key is written by the dispatcher only (`SET NX` on every pass, beside the pass's SQL):
when a pass finds it missing, Redis lost its data (flush, restart without persistence, failover)
or no dispatcher has used it yet, and every sent-but-unclaimed task whose job it no longer holds
(`held`) must be sent again at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import select
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from arq.connections import ArqRedis
from arq.constants import (
    expires_extra_ms,
    in_progress_key_prefix,
    job_key_prefix,
    result_key_prefix,
    retry_key_prefix,
)
from arq.jobs import serialize_job
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from desk.core import tracing
from desk.core.settings import Settings

log = logging.getLogger(__name__)

PROCESS_FUNCTION = "process_task"
LANES = ("short", "long")  # the lanes' names (desk/ledger/lanes.py maps kinds to them)
REDIS_ERRORS = (RedisError, OSError, TimeoutError)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=_plain).encode()


def _plain(obj: Any) -> Any:
    """arq also serializes its own results, e.g. `JobExecutionFailed("job expired")` for a job
    whose key is gone (a batch or the janitor took it): an error as its text, not a traceback."""
    if isinstance(obj, BaseException):
        return f"{type(obj).__name__}: {obj}"
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def loads(data: bytes) -> Any:
    return json.loads(data)


def job_id(prefix: str, task_id: int, run: int, send: int) -> str:
    """One id per hand-off: arq refuses a job whose id it still knows, so ids are never reused."""
    return f"{prefix}:task:{task_id}:{run}:{send}"


def parse_job_id(prefix: str, value: str) -> tuple[int, int, int] | None:
    """(task id, run, send) of one of our job ids, else None."""
    m = re.fullmatch(re.escape(prefix) + r":task:(\d+):(\d+):(\d+)", value)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def queue_name(prefix: str, lane: str = "short") -> str:
    return f"{prefix}:queue:{lane}"


def wake_channel(queue: str) -> str:
    """The pub/sub channel the send script publishes on when it queues jobs in `queue` (the
    script builds the same name: `q .. ':wake'`); workers' lanes listen on it (jobs/wake.py)."""
    return f"{queue}:wake"


def epoch_key(prefix: str) -> str:
    return f"{prefix}:epoch"


@dataclass(frozen=True)
class Send:
    """One hand-off: the task, its round, its send number, its lane and when it is due."""

    task_id: int
    run: int
    send: int
    lane: str
    due: datetime
    urgent: bool = False  # ahead of the lane's other due work (desk/ledger/sends.py `urgent`)


# Where a send goes in its lane's line (arq's workers take due jobs lowest score first). One not
# due yet is scored by its due time, so it never starts early. One that is due joins the line at
# the moment it is sent, behind what already waits: a team's e-mail topped up long after it was
# queued (desk/ledger/sends.py, "Fair sends") must not jump ahead of work sent before it. An
# urgent one goes a day ahead of that, before every ordinary job waiting.
URGENT_AHEAD_MS = 86_400_000


def line_score(s: Send, now_ms: int) -> int:
    """The send's score in its lane's sorted set, in ms."""
    due = _ms(s.due)
    if due > now_ms:
        return due
    return now_ms - URGENT_AHEAD_MS if s.urgent else now_ms


@dataclass(frozen=True)
class Sent:
    accepted: list[bool]  # per send, in order; False: not in Redis (refused or Redis down)
    reachable: bool = True


# ARGV[1..4]: arq's key prefixes (job, in progress, result, retry: `_PREFIXES`, from
# arq.constants); ARGV[5]: our job ids' prefix (`{prefix}:task:`); ARGV[6..8]: the payload's
# bytes around the task id and the run (`_payload_parts`: arq's format, its enqueue time and any
# trace context included); ARGV[9]: the send time in ms; ARGV[10]: arq's extra expiry in ms;
# ARGV[11]: the jobs, "task run send score lane " each (lane: 1-based, into ARGV[12..], the
# lanes' queues). One string for all the jobs rather than 6 values per job: encoding and parsing
# 6,000 arguments cost more than the script's work. Per job it does what arq's `enqueue_job`
# does: a job key expiring a day past its due time (PX), an entry in its lane's queue scored by
# the due time; returns 1 (taken) or 0 (refused: arq knows the id) per job. The queue entries are
# added with one ZADD per queue (1,000 ZADD calls cost a third of a sweep), and a first send
# (send 1) has no previous send to clean up. Each queue that got jobs is then published on
# (`wake_channel`), in the same script, so a worker woken by it finds them (docs/architecture.md,
# "Wake-ups").
_SEND = """
local job, running, result, retry = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local idp, head, mid, tail = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local now, extra = tonumber(ARGV[9]), tonumber(ARGV[10])
local out = {}
local adds = {}
for tid, run, send, score, lane in string.gmatch(ARGV[11], '(%d+) (%d+) (%d+) (%-?%d+) (%d+) ') do
  local q = ARGV[11 + tonumber(lane)]
  local base = idp .. tid .. ':' .. run .. ':'
  local id = base .. send
  if tonumber(send) > 1 then
    local prev = base .. string.format('%d', tonumber(send) - 1)
    redis.call('ZREM', q, prev)
    redis.call('DEL', job .. prev, running .. prev, retry .. prev)
  end
  if redis.call('EXISTS', job .. id, result .. id, running .. id) > 0 then
    out[#out + 1] = 0
  else
    local px = string.format('%d', math.max(0, tonumber(score) - now) + extra)
    redis.call('SET', job .. id, head .. tid .. mid .. run .. tail, 'PX', px)
    local a = adds[q]
    if not a then
      a = {}
      adds[q] = a
    end
    a[#a + 1] = score
    a[#a + 1] = id
    out[#out + 1] = 1
  end
end
for q, a in pairs(adds) do
  for j = 1, #a, 2000 do
    redis.call('ZADD', q, unpack(a, j, math.min(j + 1999, #a)))
  end
  redis.call('PUBLISH', q .. ':wake', '')
end
return out
"""


# KEYS: job ids; ARGV[1]: the queue, ARGV[2]: ms the job key may stay, ARGV[3] and ARGV[4]: arq's
# job and in-progress key prefixes. Takes each job not yet in progress out of the queue; its job
# key stays only that long (not deleted: arq may have read the id already and start it in a
# moment, and then it finds the job and answers "stale" instead of logging an expired job). A job
# arq already started is left to arq.
_DROP = """
local n = 0
for _, id in ipairs(KEYS) do
  if redis.call('EXISTS', ARGV[4] .. id) == 0 and redis.call('ZREM', ARGV[1], id) == 1 then
    redis.call('PEXPIRE', ARGV[3] .. id, ARGV[2])
    n = n + 1
  end
end
return n
"""


# Shortcut: arq (0.28) has no call that enqueues many jobs in one round trip (`enqueue_job` is one
# job and four commands under WATCH), so the scripts above write arq's job format and keys
# themselves. They take the key prefixes from arq.constants (`_PREFIXES`, passed as ARGV), and
# `job_payload` (and the send script's payload, built from `_payload_parts`) equals arq's
# `serialize_job` byte for byte (tests/desk/adapters/). Goes when arq
# ships a many-jobs enqueue; until then arq is pinned exactly.
_PREFIXES = (job_key_prefix, in_progress_key_prefix, result_key_prefix, retry_key_prefix)

_PAYLOAD = (
    b'{"t":null,"f":"'
    + PROCESS_FUNCTION.encode()
    + b'","a":[{"task_id":%d,"run":%d}],"k":{},"et":%d}'
)


def job_payload(task_id: int, run: int, enqueued_ms: int, trace: dict[str, str]) -> bytes:
    """A message as arq stores a job: `serialize_job(process_task, ({task_id, run, **trace},), {},
    None, enqueued_ms)` with our JSON. Without trace context the same bytes come from a template
    (no dict per message on a sweep of thousands)."""
    if trace:
        return serialize_job(
            PROCESS_FUNCTION, ({"task_id": task_id, "run": run, **trace},), {}, None,
            enqueued_ms, serializer=dumps,
        )  # fmt: skip
    return _PAYLOAD % (task_id, run, enqueued_ms)


_HEAD, _MID = b'{"t":null,"f":"' + PROCESS_FUNCTION.encode() + b'","a":[{"task_id":', b',"run":'


def _payload_parts(enqueued_ms: int, trace: dict[str, str]) -> tuple[bytes, bytes, bytes]:
    """`job_payload` cut around the task id and the run: the send script puts each job's two
    numbers between these bytes (the same for every job of one send)."""
    whole = job_payload(1, 2, enqueued_ms, trace)
    known = _HEAD + b"1" + _MID + b"2"
    if not whole.startswith(known):
        raise ValueError(f"unexpected job payload {whole!r}")
    return _HEAD, _MID, whole[len(known) :]


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


class _Pool(ConnectionPool):
    """redis-py's pool, without a loop turn inside its lock on every command.

    Why: before handing out a connection, redis-py checks it holds no unread reply by reading
    with a zero timeout, i.e. it waits one event-loop iteration (and raises and catches a
    timeout) while holding the pool's lock: a process's Redis commands got their connection one
    per loop iteration. Under the trigger's load (16 accepts in flight, two Redis calls each)
    those waits were the longest phases of an accept (p50 16-22 ms each, measured per
    request). Here the same question is answered without waiting: nothing buffered in the
    stream or the parser, and the socket not readable (select, zero timeout). A connection
    seen holding data is reconnected here: redis-py's own zero-timeout read can miss a reply
    still in the socket (the timeout fires before the transport reads it) and hand the stale
    reply to the next command. Only when the state cannot be read does redis-py's check decide.

    Shortcut: reads redis-py's and hiredis' private connection state (`_unread`); both are
    pinned exactly. Goes with redis-py's own non-waiting check (redis/redis-py#4063, merged in May
    2026) in whichever release carries it, once arq allows that redis-py (arq 0.28 requires
    redis < 6)."""

    async def ensure_connection(self, connection: AbstractConnection) -> None:
        unread = _unread(connection) if connection.is_connected else None
        if unread is False:
            return
        if unread:
            await connection.disconnect()
        await super().ensure_connection(connection)


def _unread(connection: AbstractConnection) -> bool | None:
    """Whether a reply waits unread on the connection; None when its state cannot be read."""
    stream, writer = connection._reader, connection._writer
    parsed: Any = getattr(connection._parser, "_reader", None)  # hiredis' reader
    if stream is None or writer is None or not hasattr(parsed, "has_data"):
        return None
    if getattr(stream, "_buffer", True) or parsed.has_data():
        return True
    sock = writer.get_extra_info("socket")
    if sock is None:
        return None
    readable, _, _ = select.select([sock.fileno()], [], [], 0)
    return bool(readable)


class Queue:
    def __init__(self, settings: Settings, redis: ArqRedis) -> None:
        self.settings = settings
        self.redis = redis
        self.prefix = settings.queue_prefix
        self._send = redis.register_script(_SEND)
        self._drop = redis.register_script(_DROP)
        self._token = secrets.token_hex(8)

    @classmethod
    async def open(cls, settings: Settings) -> Queue:
        # No ping here: the web must start (and accept tasks) while Redis is down.
        pool = _Pool.from_url(settings.redis_url, socket_connect_timeout=0.5, socket_timeout=2.0)
        redis = ArqRedis(
            pool,
            job_serializer=dumps,
            job_deserializer=loads,
            default_queue_name=queue_name(settings.queue_prefix),
        )
        return cls(settings, redis)

    def lane_queue(self, lane: str) -> str:
        return queue_name(self.prefix, lane)

    def _argv(self, sends: list[Send], now_ms: int, trace: dict[str, str]) -> list[Any]:
        """The send script's arguments (see `_SEND`)."""
        lane = {name: i for i, name in enumerate(LANES, 1)}
        jobs = "".join(
            f"{s.task_id} {s.run} {s.send} {line_score(s, now_ms)} {lane[s.lane]} " for s in sends
        )
        return [
            *_PREFIXES, job_id(self.prefix, 0, 0, 0).removesuffix("0:0:0"),
            *_payload_parts(now_ms, trace), now_ms, expires_extra_ms,  # as arq: a day past due
            jobs, *(self.lane_queue(name) for name in LANES),
        ]  # fmt: skip

    @tracing.traced("taskdesk.dispatch")
    async def send_many(self, sends: list[Send]) -> Sent:
        """Hand every message to Redis in one round trip (the dispatcher's sweep, a web kick)."""
        if not sends:
            return Sent([])
        now_ms = int(time.time() * 1000)
        trace = tracing.message_context()  # the worker's spans join the request that sent it
        argv = self._argv(sends, now_ms, trace)
        try:
            out = await self._send(args=argv)
        except REDIS_ERRORS as exc:
            log.warning(
                "sending %d task(s) failed (the dispatcher will resend): %s", len(sends), exc
            )
            return Sent([False] * len(sends), reachable=False)
        return Sent([bool(x) for x in out])

    async def mark_epoch(self) -> bool | None:
        """Write the epoch key unless it exists: True means it was missing (Redis lost its data,
        or this is its first dispatcher ever); None: Redis unreachable. The dispatcher only."""
        try:
            return bool(await self.redis.set(epoch_key(self.prefix), self._token, nx=True))
        except REDIS_ERRORS:
            return None

    async def held(self, sends: list[Send]) -> list[bool] | None:
        """Whether Redis still holds each send's job (its queue entry and job key); None when
        Redis cannot be asked. One round trip."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for s in sends:
                    jid = job_id(self.prefix, s.task_id, s.run, s.send)
                    pipe.zscore(self.lane_queue(s.lane), jid)
                    pipe.exists(job_key_prefix + jid)
                found = await pipe.execute()
        except REDIS_ERRORS:
            return None
        return [s is not None and bool(j) for s, j in zip(found[::2], found[1::2], strict=True)]

    async def clear_epoch(self) -> None:
        with contextlib.suppress(*REDIS_ERRORS):
            await self.redis.delete(epoch_key(self.prefix))

    async def enqueue(
        self, task_id: int, run: int, send: int, lane: str, due: datetime | None = None
    ) -> bool:
        """One message; True only if Redis took it (False: refused or unreachable)."""
        sent = await self.send_many([Send(task_id, run, send, lane, due or datetime.now(UTC))])
        return sent.accepted[0]

    async def depth(self) -> int | None:
        """Messages in every lane's queue (due or deferred)."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for lane in LANES:
                    pipe.zcard(self.lane_queue(lane))
                return sum(int(n) for n in await pipe.execute())
        except REDIS_ERRORS:
            return None

    async def head(self, lane: str, limit: int) -> list[tuple[str, bool]]:
        """The lane's due job ids, oldest first, each with whether a worker marks it in progress."""
        q = self.lane_queue(lane)
        ids = [
            b.decode()
            for b in await self.redis.zrangebyscore(q, "-inf", int(time.time() * 1000), 0, limit)
        ]
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for jid in ids:
                pipe.exists(in_progress_key_prefix + jid)
            marks = await pipe.execute()
        return list(zip(ids, (bool(m) for m in marks), strict=True))

    async def drop_queued(self, lane: str, job_ids: list[str]) -> int:
        """Take jobs out of a lane's queue before arq starts them (their tasks were claimed by a
        batch), in one round trip; returns how many were still queued. Their job keys expire
        within about one lease. Best effort: a job left behind is started by arq and answers
        "stale"."""
        if not job_ids:
            return 0
        keep_ms = int(self.settings.lease_seconds * 1000)
        try:
            return int(
                await self._drop(
                    keys=job_ids,
                    args=[self.lane_queue(lane), keep_ms, job_key_prefix, in_progress_key_prefix],
                )
            )
        except REDIS_ERRORS as exc:
            log.info("could not drop %d batch-claimed job(s): %s", len(job_ids), exc)
            return 0

    async def purge(self, job_ids: list[str]) -> None:
        """Remove jobs and whatever arq keeps for them (queue entries, in-progress markers)."""
        if not job_ids:
            return
        async with self.redis.pipeline(transaction=False) as pipe:
            for lane in LANES:
                pipe.zrem(self.lane_queue(lane), *job_ids)
            for prefix in (job_key_prefix, in_progress_key_prefix, retry_key_prefix):
                pipe.delete(*[prefix + j for j in job_ids])
            await pipe.execute()

    async def describe(self, task_id: int, run: int, send: int, lane: str) -> str:
        """What Redis holds for a task's latest send: queued, deferred, in progress or nothing."""
        if send < 1:
            return "nothing (never sent)"
        jid = job_id(self.prefix, task_id, run, send)
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.zscore(self.lane_queue(lane), jid)
                pipe.exists(job_key_prefix + jid)
                pipe.pttl(in_progress_key_prefix + jid)
                pipe.exists(result_key_prefix + jid)
                pipe.exists(epoch_key(self.prefix))
                score, job, in_progress_ms, result, epoch = await pipe.execute()
        except REDIS_ERRORS as exc:
            return f"unknown (Redis unreachable: {exc})"
        where = f"job {jid} in the {lane} lane"
        if int(in_progress_ms) != -2:  # -2: no such key; -1: a key without expiry
            ttl = (
                f"expires in {int(in_progress_ms) / 1000:.0f} s"
                if in_progress_ms > 0
                else "no expiry"
            )
            return f"in progress: {where} (marker {ttl})"
        if score is not None and job:
            due = datetime.fromtimestamp(float(score) / 1000, UTC)
            if due.timestamp() > time.time():
                return f"deferred until {due:%Y-%m-%d %H:%M:%S} UTC: {where}"
            if due.timestamp() < time.time() - URGENT_AHEAD_MS / 2000:
                return f"queued ahead of ordinary work (urgent): {where}"
            return f"queued (in line since {due:%H:%M:%S} UTC): {where}"
        if result:
            return f"finished: {where} left a result"
        lost = (
            "" if epoch else " (Redis has no epoch key: its data was lost; the dispatcher resends)"
        )
        return f"nothing for send {send} ({jid}){lost}"

    async def close(self) -> None:
        await self.redis.aclose()
