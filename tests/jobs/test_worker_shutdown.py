"""A stopping worker's registration (jobs/worker.py, jobs/heartbeat.py): the loops stop first,
then the registration goes, and a dispatcher pass cut off mid-way cannot write it back — health
must not count a worker that is shutting down."""

from __future__ import annotations

import sqlalchemy as sa

from desk.console.health import worker_key
from desk.core.runtime import Runtime
from jobs import heartbeat, worker
from tests.helpers import wait_for


async def _waiting_on_a_lock(rt: Runtime) -> bool:
    async with rt.engine.connect() as conn:
        found = await conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
        )
        return int(found.scalar_one()) > 0


async def test_a_pass_cut_off_by_shutdown_does_not_write_the_registration_back(rt, settings, redis):
    own = await Runtime.open(settings)  # the worker's runtime: its shutdown closes it
    reg = heartbeat.Registration("stopping-worker")
    key = worker_key(settings.queue_prefix, reg.worker_id)
    services = worker.start_services(own, reg)
    try:
        await wait_for(lambda: redis.exists(key), what="the worker registered")
        # The dispatcher's next pass reads the lanes' pauses: holding that table keeps the pass
        # in flight, inside its SQL, while the worker is told to stop.
        async with rt.engine.begin() as conn:
            await conn.execute(sa.text("LOCK TABLE task_lane IN ACCESS EXCLUSIVE MODE"))
            await wait_for(lambda: _waiting_on_a_lock(rt), what="a dispatcher pass in flight")
            await worker._shutdown(own, reg, [], services, [])
    finally:
        for t in services:
            t.cancel()
    assert all(t.done() for t in services), "the loops stopped before the shutdown ended"
    assert not await redis.exists(key), "the cut-off pass wrote the registration back"
