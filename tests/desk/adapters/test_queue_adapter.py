"""desk.core.queue leans on private parts of arq, redis-py and hiredis (docs/architecture.md,
"Adapters"). Each test here fails when one of them changes shape: the attributes the pool reads
exist and behave as it uses them, and what the send script writes is what arq itself writes,
under arq's own key prefixes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import hiredis
import pytest
import uvloop
from arq import constants
from arq.jobs import deserialize_job_raw, serialize_job
from redis._parsers.hiredis import _AsyncHiredisParser
from redis.asyncio.connection import ConnectionPool
from redis.utils import HIREDIS_AVAILABLE

from desk.core import queue
from desk.core.queue import PROCESS_FUNCTION, Send, dumps, job_id, job_payload, loads
from desk.core.runtime import Runtime


async def test_runs_on_the_loop_it_names(request: pytest.FixtureRequest) -> None:
    on_uvloop = isinstance(asyncio.get_running_loop(), uvloop.Loop)
    assert on_uvloop == ("uvloop" in request.node.callspec.id)


async def test_the_connection_state_the_pool_reads_is_there(rt: Runtime) -> None:
    assert HIREDIS_AVAILABLE, "without hiredis the pool falls back to redis-py's waiting check"
    pool = rt.redis.connection_pool
    assert isinstance(pool, queue._Pool) and "ensure_connection" in vars(ConnectionPool)
    await rt.redis.ping()
    conn = await pool.get_connection()
    try:
        assert isinstance(conn._reader, asyncio.StreamReader)
        assert isinstance(conn._reader._buffer, bytearray) and not conn._reader._buffer
        assert isinstance(conn._writer, asyncio.StreamWriter)
        assert isinstance(conn._parser, _AsyncHiredisParser)
        assert isinstance(conn._parser._reader, hiredis.Reader)
        assert conn._parser._reader.has_data() is False
        assert conn._writer.get_extra_info("socket").fileno() >= 0
    finally:
        await pool.release(conn)


async def test_get_connection_asks_ensure_connection(rt: Runtime, monkeypatch) -> None:
    """The override is on redis-py's path: `get_connection` hands every connection to it."""
    pool = rt.redis.connection_pool
    seen = []
    original = pool.ensure_connection

    async def spy(connection):
        seen.append(connection)
        await original(connection)

    monkeypatch.setattr(pool, "ensure_connection", spy)
    conn = await pool.get_connection()
    await pool.release(conn)
    assert seen == [conn]


async def test_the_buffers_report_data_as_the_pool_reads_them() -> None:
    # async: a StreamReader needs a running loop (a sync test found none after another closed it)
    reader = hiredis.Reader()
    assert not reader.has_data()
    reader.feed(b"+OK\r\n")
    assert reader.has_data()
    assert reader.gets() == b"OK" and not reader.has_data()
    stream = asyncio.StreamReader()
    assert not stream._buffer
    stream.feed_data(b"+OK\r\n")
    assert stream._buffer


def test_the_scripts_take_arqs_prefixes_from_arq() -> None:
    assert (
        constants.job_key_prefix,
        constants.in_progress_key_prefix,
        constants.result_key_prefix,
        constants.retry_key_prefix,
    ) == queue._PREFIXES
    for script in (queue._SEND, queue._DROP):
        assert "arq:" not in script, "prefixes come in as ARGV, never as literals"


@pytest.mark.parametrize(
    "trace", [{}, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}]
)
def test_the_payload_is_serialize_jobs(trace: dict[str, str]) -> None:
    arq = serialize_job(
        PROCESS_FUNCTION, ({"task_id": 12, "run": 3, **trace},), {}, None, 1_700_000_000_123,
        serializer=dumps,
    )  # fmt: skip
    assert job_payload(12, 3, 1_700_000_000_123, trace) == arq


@pytest.mark.parametrize(
    "trace", [{}, {"tp": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}]
)
def test_the_send_scripts_payload_parts_rebuild_serialize_jobs(trace: dict[str, str]) -> None:
    """The script writes `head + task id + mid + run + tail` for each job of a send."""
    head, mid, tail = queue._payload_parts(1_700_000_000_123, trace)
    arq = serialize_job(
        PROCESS_FUNCTION, ({"task_id": 987_654, "run": 3, **trace},), {}, None, 1_700_000_000_123,
        serializer=dumps,
    )  # fmt: skip
    assert head + b"987654" + mid + b"3" + tail == arq


async def test_a_resent_job_reads_back_as_serialize_jobs_bytes(rt: Runtime) -> None:
    """A second send (the script builds the previous id to clean up) writes arq's bytes too."""
    q = rt.queue
    assert (await q.send_many([Send(987_655, 2, 1, "long", datetime.now(UTC))])).accepted == [True]
    assert (await q.send_many([Send(987_655, 2, 2, "long", datetime.now(UTC))])).accepted == [True]
    assert not await rt.redis.exists(constants.job_key_prefix + job_id(q.prefix, 987_655, 2, 1))
    assert await rt.redis.zrange(q.lane_queue("long"), 0, -1) == [
        job_id(q.prefix, 987_655, 2, 2).encode()
    ]
    raw = await rt.redis.get(constants.job_key_prefix + job_id(q.prefix, 987_655, 2, 2))
    enqueued_ms = deserialize_job_raw(raw, deserializer=loads)[4]
    assert raw == serialize_job(
        PROCESS_FUNCTION, ({"task_id": 987_655, "run": 2},), {}, None, enqueued_ms,
        serializer=dumps,
    )  # fmt: skip


async def test_a_sent_job_reads_back_as_serialize_jobs_bytes(rt: Runtime) -> None:
    q = rt.queue
    sent = await q.send_many([Send(987_654, 3, 1, "short", datetime.now(UTC))])
    assert sent.accepted == [True]
    raw = await rt.redis.get(constants.job_key_prefix + job_id(q.prefix, 987_654, 3, 1))
    function, args, kwargs, job_try, enqueued_ms = deserialize_job_raw(raw, deserializer=loads)
    assert (function, args, kwargs, job_try) == (PROCESS_FUNCTION, [{"task_id": 987_654, "run": 3}], {}, None)  # fmt: skip
    assert raw == serialize_job(
        PROCESS_FUNCTION, ({"task_id": 987_654, "run": 3},), {}, None, enqueued_ms,
        serializer=dumps,
    )  # fmt: skip


async def test_a_send_writes_what_arqs_enqueue_job_writes(rt: Runtime) -> None:
    """The same message sent by the script and by `ArqRedis.enqueue_job`: the same queue score,
    the same job bytes (but for the enqueue time), about the same expiry."""
    q = rt.queue
    due = (datetime.now(UTC) + timedelta(minutes=5)).replace(microsecond=0)
    ours, theirs = job_id(q.prefix, 55, 1, 1), f"{q.prefix}:arq-enqueued"
    assert (await q.send_many([Send(55, 1, 1, "long", due)])).accepted == [True]
    job = await rt.redis.enqueue_job(
        PROCESS_FUNCTION, {"task_id": 55, "run": 1}, _job_id=theirs,
        _queue_name=q.lane_queue("long"), _defer_until=due,
    )  # fmt: skip
    assert job is not None
    lane = q.lane_queue("long")
    assert await rt.redis.zscore(lane, ours) == await rt.redis.zscore(lane, theirs)
    mine = await rt.redis.get(constants.job_key_prefix + ours)
    arqs = await rt.redis.get(constants.job_key_prefix + theirs)
    et_mine = deserialize_job_raw(mine, deserializer=loads)[4]
    et_arqs = deserialize_job_raw(arqs, deserializer=loads)[4]
    assert mine == arqs.replace(b'"et":%d' % et_arqs, b'"et":%d' % et_mine)
    ttl_mine = await rt.redis.pttl(constants.job_key_prefix + ours)
    ttl_arqs = await rt.redis.pttl(constants.job_key_prefix + theirs)
    assert abs(ttl_mine - ttl_arqs) < 5_000


@pytest.mark.parametrize(
    "prefix",
    [constants.job_key_prefix, constants.result_key_prefix, constants.in_progress_key_prefix],
)
async def test_a_send_is_refused_when_arq_knows_the_id(rt: Runtime, prefix: str) -> None:
    q = rt.queue
    await rt.redis.set(prefix + job_id(q.prefix, 77, 1, 1), b"1", px=60_000)
    assert await q.enqueue(77, 1, 1, "short") is False


async def test_drop_expires_the_job_under_arqs_job_key(rt: Runtime) -> None:
    q = rt.queue
    assert await q.enqueue(78, 1, 1, "short")
    jid = job_id(q.prefix, 78, 1, 1)
    assert await q.drop_queued("short", [jid]) == 1
    lease_ms = int(rt.settings.lease_seconds * 1000)
    assert 0 < await rt.redis.pttl(constants.job_key_prefix + jid) <= lease_ms
