"""`create_served_app` (what `taskdesk serve` runs) sets the process's cyclic collector: young
passes every 10,000 allocations, and what start-up made frozen once the lifespan has started.
Run in a child process: both settings are process-wide, and pytest's process must keep its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHECK = """
import asyncio, gc, json
from api.app import create_served_app

async def main():
    app = create_served_app()
    before = gc.get_freeze_count()
    async with app.router.lifespan_context(app):
        during = gc.get_freeze_count()
    print(json.dumps({"threshold": gc.get_threshold(), "before": before, "during": during}))

asyncio.run(main())
"""


def test_the_served_process_tunes_and_freezes_the_collector() -> None:
    # No server is needed: start-up neither waits for PostgreSQL nor pings Redis.
    env = dict(
        os.environ,
        DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
        REDIS_URL="redis://127.0.0.1:1/0",
        TASKDESK_ENV="test",
        LOG_LEVEL="WARNING",
    )
    done = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["threshold"] == [10_000, 10, 10]
    assert got["before"] == 0  # nothing frozen before the lifespan ran
    assert got["during"] > 10_000  # the modules, the schema and the runtime
