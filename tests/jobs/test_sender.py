"""A process's direct sends are gathered (desk.ledger.delivery.Sender): sends made together go
to Redis in one round trip, each task is sent exactly once, and a send Redis refuses is handed
back in the ledger alone, the others staying sent."""

import asyncio
from datetime import timedelta

import pytest
from arq.constants import job_key_prefix

from desk.core.queue import job_id
from desk.core.runtime import Runtime
from desk.ledger import delivery
from desk.ledger import sends as ledger_sends
from desk.work import tasks


@pytest.fixture
async def rt_private(settings, private_redis, clock):
    runtime = await Runtime.open(settings.model_copy(update={"redis_url": private_redis.url}))
    runtime.clock = clock
    yield runtime
    await runtime.close()


async def _script_calls(rt) -> int:
    """Lua script calls Redis has served so far (a send of any size is one)."""
    stats = await rt.redis.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("eval", "evalsha"))


async def _reserved(rt, world, clock, n: int) -> list[ledger_sends.Due]:
    """`n` NOOPs due later (not sent at accept), each with a send reserved in the ledger now."""
    later = clock() + timedelta(hours=2)
    made = [await tasks.submit_noop(rt, world.staff, world.team, run_at=later) for _ in range(n)]
    dues = []
    async with rt.engine.begin() as conn:
        for t in made:
            due = await ledger_sends.reserve_send(conn, t.id, t.run, now=clock(), team_max=9)
            assert due is not None
            dues.append(due)
    return dues


async def _queued(rt) -> list[bytes]:
    return await rt.redis.zrange(rt.queue.lane_queue("short"), 0, -1)


async def _dispatched(rt, ids: list[int]) -> dict[int, bool]:
    found = await rt.pg.all(
        "SELECT id, dispatched_at IS NOT NULL AS d FROM background_task WHERE id = ANY(%(i)s)",
        {"i": ids},
    )
    return {r["id"]: r["d"] for r in found}


def _jid(rt, due: ledger_sends.Due) -> str:
    return job_id(rt.settings.queue_prefix, due.task_id, due.run, due.send)


async def test_sends_made_together_go_in_one_round_trip(rt_private, world, clock):
    rt = rt_private
    dues = await _reserved(rt, world, clock, 20)
    sender = delivery.sender(rt)
    assert await sender.send(dues[0])  # the script is loaded: later calls are one each
    before = await _script_calls(rt)
    assert all(await asyncio.gather(*(sender.send(d) for d in dues[1:])))
    assert await _script_calls(rt) - before == 1
    queued = await _queued(rt)
    assert sorted(queued) == sorted(_jid(rt, d).encode() for d in dues), "each exactly once"


async def test_a_refused_send_alone_is_handed_back(rt_private, world, clock):
    rt = rt_private
    dues = await _reserved(rt, world, clock, 10)
    refused = dues[2:5]
    for d in refused:  # arq still knows these ids: Redis refuses them
        await rt.redis.set(job_key_prefix + _jid(rt, d), b"x")
    sent = await asyncio.gather(*(delivery.sender(rt).send(d) for d in dues))
    assert sent == [d not in refused for d in dues]
    dispatched = await _dispatched(rt, [d.task_id for d in dues])
    assert dispatched == {d.task_id: d not in refused for d in dues}
    assert sorted(await _queued(rt)) == sorted(
        _jid(rt, d).encode() for d in dues if d not in refused
    )


async def test_concurrent_accepts_are_each_sent_once(rt_private, world):
    rt = rt_private
    made = await asyncio.gather(
        *(tasks.submit_noop(rt, world.staff, world.team) for _ in range(40))
    )
    assert len({t.id for t in made}) == 40 and all(t.sends == 1 for t in made)
    assert sorted(await _queued(rt)) == sorted(
        job_id(rt.settings.queue_prefix, t.id, t.run, 1).encode() for t in made
    )
    assert all((await _dispatched(rt, [t.id for t in made])).values())


async def test_redis_down_hands_back_every_send(rt_private, private_redis, world, clock):
    rt = rt_private
    dues = await _reserved(rt, world, clock, 5)
    private_redis.kill()
    sent = await asyncio.gather(*(delivery.sender(rt).send(d) for d in dues))
    assert sent == [False] * 5
    assert not any((await _dispatched(rt, [d.task_id for d in dues])).values())
