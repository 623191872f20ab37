import pytest

from desk.work import tasks
from tests.helpers import running_workers, wait_for

pytestmark = pytest.mark.slow  # starts real worker or server processes


async def test_real_worker_completes_an_export(rt, world, tmp_path, settings):
    rt.clock = __import__("desk.core.clock", fromlist=["utcnow"]).utcnow
    with running_workers(settings, tmp_path) as _workers:
        task = await tasks.create_export(rt, world.staff, world.team, {})

        async def done():
            t = await tasks.get_task(rt, world.staff, task.id)
            return t if t.status == "COMPLETED" else None

        t = await wait_for(done, timeout=30, what="export completed")
        assert t.result_summary == "4 rows exported."
