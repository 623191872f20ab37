"""kill -9 of a real worker mid-import: after rescue every external id exists once and the
counts add up."""

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.imports import service as imports
from desk.work import tasks
from tests.helpers import WorkerProcess, running_workers, wait_for
from tests.jobs.stall_helpers import kill_mid_work

pytestmark = pytest.mark.slow  # starts real worker or server processes

ROWS = 60_000


def _csv() -> bytes:
    lines = ["external_id,title,status,priority,assignee_email,creator_email"]
    lines += [
        f"X-{i},Imported ticket {i},OPEN,{['LOW', 'HIGH'][i % 2]},chen@acme.test,"
        for i in range(ROWS)
    ]
    return ("\n".join(lines) + "\n").encode()


async def _row(rt, task_id):
    async with rt.engine.connect() as conn:
        return (
            await conn.execute(
                sa.text("SELECT * FROM background_task WHERE id = :i"), {"i": task_id}
            )
        ).one()


async def test_kill_9_mid_import_neither_duplicates_nor_skips(rt, world, settings, tmp_path):
    rt.clock = utcnow
    env = {"lease_seconds": 2, "import_batch_rows": 500}
    upload = await imports.store_upload(rt, world.admin, world.team, "big.csv", _csv())
    first = WorkerProcess(settings, tmp_path / "first.log", **env)
    try:
        task = await imports.start_import(rt, world.admin, world.team, upload.id, "create")

        async def midway():
            row = await _row(rt, task.id)
            return row if row.status == "RUNNING" and 0 < row.progress_current < ROWS // 2 else None

        await wait_for(midway, timeout=60, interval=0.01, what="import half-way")
        assert task.id in await kill_mid_work(rt, first)
    finally:
        first.stop()
    with running_workers(settings, tmp_path, **env):

        async def done():
            row = await _row(rt, task.id)
            return row if row.status == "COMPLETED" else None

        row = await wait_for(done, timeout=120, what="rescued import completed")
    assert row.attempts == 2
    async with rt.engine.connect() as conn:
        n, distinct = (
            await conn.execute(
                sa.text(
                    "SELECT count(*), count(DISTINCT external_id) FROM ticket WHERE team_id = :t AND external_id LIKE 'X-%'"
                ),
                {"t": world.team},
            )
        ).one()
    assert n == distinct == ROWS
    assert row.stats == {"created": ROWS, "updated": 0, "unchanged": 0, "rejected": 0}
    assert (await tasks.get_task(rt, world.admin, task.id)).progress_current == ROWS
