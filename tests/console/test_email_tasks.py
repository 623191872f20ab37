"""A failed e-mail with no team (a password reset) in the operators' console: listed, shown,
grouped and retried like any task; a team admin does not see it."""

from __future__ import annotations

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.work import mail
from jobs.execution import execute
from jobs.processors import registry
from tests.console.conftest import HTML
from tests.factories import World


async def _failed_reset(rt: Runtime) -> int:
    async with rt.engine.begin() as conn:
        task_id = await mail.queue_email(
            conn, to="lin@acme.test", template="password_reset",
            params={"link": "/reset/tok", "expires_at": "2026-12-10T08:00:00+00:00"},
            locale="en", timezone="UTC", team_id=None, user_id=None, now=rt.clock(),
        )  # fmt: skip
    assert await execute(rt, registry(), task_id, 1) == "failed"  # no SMTP_URL in tests
    return task_id


async def test_operators_see_and_retry_a_team_less_e_mail(
    rt: Runtime,
    world: World,
    page_as,
    operator: int,
) -> None:
    task_id = await _failed_reset(rt)
    page = await page_as(operator)
    for url in ("/ops", "/ops/tasks", f"/ops/tasks/{task_id}", "/ops/failures", "/ops/audit"):
        r = await page.get(url, headers=HTML)
        assert r.status_code == 200, (url, r.text[:500])
    r = await page.get("/ops/failures", headers=HTML)
    assert "No mail server is configured" in r.text
    r = await page.post(f"/ops/tasks/{task_id}/retry", data={"csrf_token": page.csrf})
    assert r.status_code < 400, r.text[:500]
    async with rt.engine.connect() as conn:
        status = await conn.scalar(
            sa.text("SELECT status FROM background_task WHERE id = :i"), {"i": task_id}
        )
    assert status == "WAITING"


async def test_a_team_admin_does_not_see_it(rt: Runtime, world: World, page_as) -> None:
    task_id = await _failed_reset(rt)
    page = await page_as(world.admin)
    r = await page.get(f"/ops/tasks/{task_id}", headers=HTML)
    assert r.status_code == 404
    r = await page.get("/ops/failures", headers=HTML)
    assert r.status_code == 200 and "No mail server is configured" not in r.text
