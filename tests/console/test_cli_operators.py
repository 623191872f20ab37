"""`taskdesk operators add/remove/list`, through the real command: the role it grants opens the
console at once, and each change is in the audit trail."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from desk.people import audit
from tests.console.conftest import HTML
from tests.helpers import ROOT, settings_env


def _taskdesk(settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "taskdesk", *args],
        cwd=ROOT, env=settings_env(settings), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


async def _cli(settings, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(_taskdesk, settings, "operators", *args)


async def test_add_list_remove(page_as, rt, world, settings) -> None:
    staff = await page_as(world.staff)
    assert (await staff.get("/ops", headers=HTML)).status_code == 404
    empty = await _cli(settings, "list")
    assert empty.returncode == 0 and "no operators" in empty.stdout
    added = await _cli(settings, "add", "CHEN@acme.test")
    assert added.returncode == 0 and "is now an operator" in added.stdout
    assert "already an operator" in (await _cli(settings, "add", "chen@acme.test")).stdout
    assert "chen@acme.test" in (await _cli(settings, "list")).stdout
    page = await staff.get("/ops", headers=HTML)
    assert page.status_code == 200 and "Operator: every team" in page.text
    removed = await _cli(settings, "remove", "chen@acme.test")
    assert removed.returncode == 0 and "no longer an operator" in removed.stdout
    assert (await staff.get("/ops", headers=HTML)).status_code == 404
    unknown = await _cli(settings, "add", "nobody@x.test")
    assert unknown.returncode == 1 and "No user with email nobody@x.test" in unknown.stderr
    trail = [
        (e.action, e.actor, e.detail) for e in await audit.recent(rt, operator=True, team_ids=())
    ]
    assert trail == [
        ("operator_remove", "cli", "chen@acme.test"),
        ("operator_add", "cli", "chen@acme.test"),
    ]
