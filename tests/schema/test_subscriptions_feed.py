"""GraphQL subscriptions across the change feed's failures and processes (desk/core/feed.py,
docs/architecture.md, "Change feed"): a listener killed while a real worker finishes the task is
survived (the reconnect's `Resync` re-reads the ledger, so the stream still ends at the right
state), and two web processes on one database each push what was changed through the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from desk.core.feed import Feed
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.people import users
from desk.work import tasks
from schema.subscriptions import ENDED
from tests.factories import World
from tests.helpers import free_port, running_workers, wait_for
from tests.schema.subscribing import Served, serve, socket

TASK = "subscription($id: ID!) { taskUpdated(id: $id) { id status resultSummary } }"
CANCEL = "mutation($id: ID!) { cancelTask(id: $id) { __typename ... on Task { id status } } }"


def _feed(served: Served) -> Feed:
    feed = served.rt.feed
    assert feed is not None
    return feed


async def _ended(rt: Runtime, task_id: int) -> str:
    """The task's status in the ledger once it has ended; "" until then."""
    async with await psycopg.AsyncConnection.connect(rt.settings.libpq_url) as conn:
        cur = await conn.execute("SELECT status FROM background_task WHERE id = %s", (task_id,))
        row = await cur.fetchone()
    assert row is not None
    return str(row[0]) if row[0] in ENDED else ""


@pytest.mark.slow  # a real worker process
async def test_a_killed_listener_is_survived_and_the_stream_ends_at_the_right_state(
    settings: Settings, rt: Runtime, world: World, clock: Any, tmp_path: Path
) -> None:
    token = (await users.create_token(rt, world.staff, "t"))[1]
    export = await tasks.create_export(rt, world.staff, world.team, {})
    task_id = export.id or 0
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        feed = _feed(served)
        op = await s.subscribe(TASK, {"id": str(task_id)})
        assert (await s.next(op))["data"]["taskUpdated"]["status"] == "WAITING"
        generation, url = feed.generation, feed.url

        # Kill the listening connection, and keep it down while the task runs to its end: its
        # reconnects go where nothing answers (as a database out of reach would) until the
        # change has committed, so every notice of it is lost for sure, not by a race with the
        # reconnect's short backoff.
        feed.url = f"postgresql://postgres@127.0.0.1:{free_port()}/unreachable"
        try:
            async with await psycopg.AsyncConnection.connect(
                rt.settings.libpq_url, autocommit=True
            ) as admin:
                pid = feed.backend_pid
                assert pid is not None
                cur = await admin.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))
                assert (await cur.fetchone()) == (True,)  # gone (it waits for the end)

            async def down() -> bool:
                return not feed.connected

            await wait_for(down, timeout=30, what="the listener to notice it was killed")
            with running_workers(settings, tmp_path):  # a real worker runs the export
                ended = await wait_for(
                    lambda: _ended(rt, task_id), timeout=60, what="the real worker to end it"
                )
            assert ended == "COMPLETED"
            assert not feed.connected and feed.generation == generation  # down all along
        finally:
            feed.url = url  # back within reach: the listener reconnects (and says Resync)

        events = [e["data"]["taskUpdated"] for e in await s.until_complete(op)]
        # Nothing was told while it was down (RUNNING was never heard of); the reconnect's
        # re-read found the end, and the stream completed there.
        assert [e["status"] for e in events] == ["COMPLETED"], events
        assert events[-1]["resultSummary"] == "4 rows exported."
        assert feed.connected and feed.generation > generation  # it reconnected
        assert feed.backend_pid not in (None, pid)


async def _cancel_through(served: Served, token: str, task_id: int) -> dict[str, Any]:
    async with served.client() as client:
        r = await client.post(
            "/graphql",
            json={"query": CANCEL, "variables": {"id": str(task_id)}},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert "errors" not in body, body
    return body["data"]["cancelTask"]  # type: ignore[no-any-return]


async def test_two_web_processes_each_push_changes_made_through_the_other(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """Two servers (two web processes' worth: each its own lifespan, pools and listener) over
    one database: a subscriber on one gets a cancel made through the other's GraphQL."""
    token = (await users.create_token(rt, world.staff, "t"))[1]
    async with serve(settings, clock) as a, serve(settings, clock) as b:
        assert _feed(a) is not _feed(b) and _feed(a).backend_pid != _feed(b).backend_pid
        for here, there in [(a, b), (b, a)]:
            export = await tasks.create_export(rt, world.staff, world.team, {"q": here.url})
            task_id = export.id or 0
            async with socket(here, token=token) as s:
                op = await s.subscribe(TASK, {"id": str(task_id)})
                first = (await s.next(op))["data"]["taskUpdated"]
                assert (first["id"], first["status"]) == (str(task_id), "WAITING")
                cancelled = await _cancel_through(there, token, task_id)
                assert cancelled == {
                    "__typename": "Task",
                    "id": str(task_id),
                    "status": "CANCELLED",
                }
                events = await s.until_complete(op)  # pushed by `here`, which made no change
                assert [e["data"]["taskUpdated"]["status"] for e in events] == ["CANCELLED"]
