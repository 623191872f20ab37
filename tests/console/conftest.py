"""Fixtures for the console tests: the page clients of tests/ui, a site operator who belongs to
no team, and a scene with tasks in every state across both teams."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.people import operators
from desk.work import tasks
from tests.factories import World
from tests.ui.conftest import app, page_as  # noqa: F401 - fixtures shared with the page tests

HTML = {"Accept": "text/html"}


@pytest.fixture
async def operator(rt: Runtime, world: World) -> int:
    async with rt.engine.begin() as conn:
        uid = (
            await conn.execute(
                sa.text(
                    "INSERT INTO app_user (email, display_name) VALUES ('ops@site.test', 'Ops') "
                    "RETURNING id"
                )
            )
        ).scalar_one()
    assert await operators.add(rt, "ops@site.test")
    return int(uid)


async def fail(rt: Runtime, task_id: int, error: str, *, status: str = "FAILED") -> None:
    """Put a task where a worker would have left it after an error (FAILED, or retrying)."""
    attempts = 5 if status == "FAILED" else 1
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'RUNNING', attempts = :a, execution_id = 'x' "
                "WHERE id = :id"
            ),
            {"id": task_id, "a": attempts},
        )
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = :s, last_error = :e, run = run + 1, "
                " finished_at = CASE WHEN :done THEN now() END WHERE id = :id"
            ),
            {"id": task_id, "s": status, "e": error, "done": status == "FAILED"},
        )


@dataclass
class Scene:
    acme_failed: list[int] = field(default_factory=list)  # "Ticket N is locked" in Acme
    acme_other: int = 0  # a different error in Acme
    acme_retrying: int = 0  # "Ticket N is locked", waiting to retry
    globex_failed: int = 0  # "Ticket N is locked" in Globex
    acme_waiting: int = 0


@pytest.fixture
async def scene(rt: Runtime, world: World) -> Scene:
    s = Scene()
    for i in range(3):
        t = await tasks.create_export(rt, world.staff, world.team, {"q": f"a{i}"})
        assert t.id is not None
        await fail(rt, t.id, f"Ticket {100 + i} is locked by 'someone {i}'")
        s.acme_failed.append(t.id)
    other = await tasks.create_export(rt, world.staff, world.team, {"q": "other"})
    await fail(rt, other.id or 0, "Disk full")
    s.acme_other = other.id or 0
    retrying = await tasks.create_export(rt, world.admin, world.team, {"q": "r"})
    await fail(rt, retrying.id or 0, "Ticket 7 is locked by 'x'", status="WAITING")
    s.acme_retrying = retrying.id or 0
    globex = await tasks.create_export(rt, world.outsider, world.other_team, {"q": "g"})
    await fail(rt, globex.id or 0, "Ticket 999 is locked by 'y'")
    s.globex_failed = globex.id or 0
    waiting = await tasks.create_export(rt, world.customer, world.team, {"q": "w"})
    s.acme_waiting = waiting.id or 0
    return s
