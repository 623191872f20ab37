"""One team's e-mail storm does not hold back another team's reminder or a password reset
(docs/architecture.md, "Fair sends"), with a real worker process and SMTP server: one short slot,
a storm of 1,000 e-mails queued first. In arrival order the reminder and the reset would wait
for all of them; with the team's window they run while most of the storm still waits."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.core.clock import utcnow
from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.work import mail, reminders
from tests.factories import World
from tests.helpers import WorkerProcess, wait_for
from tests.smtp_server import SmtpServer

pytestmark = pytest.mark.slow

STORM = 1000
WINDOW = 10
EXPIRES = "2026-12-10T08:00:00+00:00"
PARAMS = {"task_id": 1, "team_name": "Acme", "rows": 3, "link": "/tasks/1", "expires_at": EXPIRES}


async def _queue(rt: Runtime, team: int | None, template: str) -> int:
    params = PARAMS if template == "export_ready" else {"link": "/r/x", "expires_at": EXPIRES}
    async with rt.engine.begin() as conn:
        return await mail.queue_email(
            conn, to="someone@acme.test", template=template, params=params, locale="en",
            timezone="UTC", team_id=team, user_id=None, now=rt.clock(),
        )  # fmt: skip


async def _storm(rt: Runtime, team: int) -> list[int]:
    """STORM e-mails of `team`: one queued as the desk queues it, the rest copies of its row."""
    first = await _queue(rt, team, "export_ready")
    async with rt.engine.begin() as conn:
        copies = await conn.execute(
            sa.text(
                "INSERT INTO background_task (kind, team_id, owner_id, scope_key, filters, run_at, "
                " max_attempts, sends, created_at, updated_at) "
                "SELECT kind, team_id, owner_id, scope_key || ':' || n, filters, run_at, "
                " max_attempts, 0, created_at, updated_at "
                "FROM background_task, generate_series(2, :n) AS n WHERE id = :id "
                "ORDER BY n RETURNING id"
            ),
            {"n": STORM, "id": first},
        )
        return [first, *copies.scalars()]


async def _status(rt: Runtime, ids: list[int]) -> dict[str, int]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT status, count(*) FROM background_task WHERE id = ANY(:ids) GROUP BY 1"),
            {"ids": ids},
        )
        return {r[0]: r[1] for r in rows}


async def test_a_mail_storm_does_not_hold_back_another_teams_reminder(
    rt: Runtime, world: World, mail_settings: Settings, smtp: SmtpServer, tmp_path
) -> None:
    rt.clock = utcnow
    storm = await _storm(rt, world.team)
    reminder = await reminders.schedule_reminder(
        rt, world.outsider, world.tickets["globex"], at=utcnow() + timedelta(seconds=3)
    )
    assert reminder.id is not None
    reset = [await _queue(rt, None, "password_reset")]
    worker = WorkerProcess(
        mail_settings,
        tmp_path / "worker.log",
        smtp_url=smtp.url,
        worker_max_jobs=1,
        team_mail_max_queued=WINDOW,
    )
    try:

        async def both_done() -> dict[str, int] | None:
            done = await _status(rt, [reminder.id, *reset])
            return await _status(rt, storm) if done == {"COMPLETED": 2} else None

        storm_then = await wait_for(
            both_done, timeout=120, what="the other team's reminder and the reset to run"
        )

        async def storm_moves() -> dict[str, int] | None:
            now = await _status(rt, storm)
            return now if now.get("COMPLETED", 0) >= 1 else None

        # Both are urgent (docs/architecture.md, "Priorities"), so they may well run before any
        # of the storm; the storm is not held back for ever either, a window at a time.
        await wait_for(storm_moves, timeout=120, what="the storm to be sent too")
    finally:
        worker.stop()
    assert storm_then.get("WAITING", 0) > STORM // 2, storm_then  # most of the storm still waits
