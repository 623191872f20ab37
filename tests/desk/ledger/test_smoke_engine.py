import csv
import io

from desk.work import tasks
from jobs import dispatcher
from jobs.execution import execute
from jobs.processors import registry


async def _drain(rt, chunks):
    return b"".join([c async for c in chunks])


async def test_export_end_to_end_in_process(rt, world):
    task = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    assert task.status == "WAITING"
    assert await execute(rt, registry(), task.id, task.run) == "done"
    done = await tasks.get_task(rt, world.staff, task.id)
    assert done.status == "COMPLETED", done
    f = await tasks.open_export_result(rt, world.staff, task.id)
    data = await _drain(rt, f.chunks)
    rows = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    print(rows)
    assert rows[0][0] == "id"
    assert await dispatcher.run_once(rt) == 0
