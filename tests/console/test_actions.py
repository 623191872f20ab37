"""The console's actions change exactly what they say and are all in the audit trail: retry and
cancel of one task, retry and cancel of a whole failure group (as confirmed), and granting or
removing the operator role from the command line."""

from __future__ import annotations

import sqlalchemy as sa

from desk.console import failures
from desk.people import audit, operators
from desk.work import tasks
from tests.console.conftest import HTML, fail


async def _statuses(rt) -> dict[int, str]:
    async with rt.engine.connect() as conn:
        rows = await conn.execute(sa.text("SELECT id, status FROM background_task"))
        return {r.id: r.status for r in rows}


async def _audit(rt) -> list[audit.Entry]:
    return list(reversed(await audit.recent(rt, operator=True, team_ids=())))


async def _confirmed(page, key: str, action: str) -> str:
    """The max_id the confirmation page carries (what the person agreed to)."""
    text = (await page.get(f"/ops/failures/{key}/{action}", headers=HTML)).text
    return text.split('name="max_id" value="', 1)[1].split('"', 1)[0]


async def test_group_retry_touches_exactly_the_group(page_as, world, scene, operator, rt) -> None:
    before = await _statuses(rt)
    page = await page_as(operator)
    key = next(g.key for g in await failures.groups(rt, await operators.scope_of(rt, operator)))
    max_id = await _confirmed(page, key, "retry")
    # A failure of the same kind arriving after the confirmation is not part of what was agreed.
    late = await tasks.create_export(rt, world.staff, world.team, {"q": "late"})
    await fail(rt, late.id or 0, "Ticket 5 is locked by 'late'")
    r = await page.hx_post(f"/ops/failures/{key}/retry", {"max_id": max_id})
    assert r.status_code == 204 and "done=retry&n=4&skipped=0" in r.headers["HX-Redirect"]
    after = await _statuses(rt)
    group = {*scene.acme_failed, scene.globex_failed}
    changed = {i for i in after if after[i] != before.get(i, after[i])}
    assert changed == group
    assert all(after[i] == "WAITING" for i in group)
    assert after[late.id] == "FAILED" and after[scene.acme_other] == "FAILED"
    assert after[scene.acme_retrying] == "WAITING"
    entries = [e for e in await _audit(rt) if e.action == "group_retry"]
    by_team = {e.team_id: sorted(e.task_ids) for e in entries}
    assert by_team == {
        world.team: sorted(scene.acme_failed),
        world.other_team: [scene.globex_failed],
    }
    assert all(e.actor == "ops@site.test" for e in entries)
    done = await page.get("/ops/failures?done=retry&n=4&skipped=0", headers=HTML)
    assert "4 tasks retried." in done.text


async def test_team_admins_group_retry_leaves_other_teams_alone(
    page_as, world, scene, operator, rt
) -> None:
    admin = await page_as(world.admin)
    key = next(g.key for g in await failures.groups(rt, await operators.scope_of(rt, world.admin)))
    max_id = await _confirmed(admin, key, "retry")
    await admin.hx_post(f"/ops/failures/{key}/retry", {"max_id": max_id})
    after = await _statuses(rt)
    assert {after[i] for i in scene.acme_failed} == {"WAITING"}
    assert after[scene.globex_failed] == "FAILED"


async def test_group_cancel_cancels_the_retrying_ones(page_as, world, scene, operator, rt) -> None:
    page = await page_as(operator)
    key = next(g.key for g in await failures.groups(rt, await operators.scope_of(rt, operator)))
    text = (await page.get(f"/ops/failures/{key}/cancel", headers=HTML)).text
    assert "This cancels 1 task waiting to retry." in text
    await page.hx_post(
        f"/ops/failures/{key}/cancel", {"max_id": await _confirmed(page, key, "cancel")}
    )
    after = await _statuses(rt)
    assert after[scene.acme_retrying] == "CANCELLED"
    assert {after[i] for i in scene.acme_failed} == {"FAILED"}
    [entry] = [e for e in await _audit(rt) if e.action == "group_cancel"]
    assert entry.task_ids == [scene.acme_retrying] and entry.team_id == world.team


async def test_every_action_writes_its_audit_row(
    page_as, world, scene, operator, rt, clock
) -> None:
    page = await page_as(operator)
    await page.hx_post(f"/ops/tasks/{scene.acme_other}/retry")
    await page.hx_post(f"/ops/tasks/{scene.acme_waiting}/cancel")
    assert await operators.remove(rt, "ops@site.test")
    assert not await operators.remove(rt, "ops@site.test")  # not an operator any more: no row
    assert await operators.add(rt, "ops@site.test")
    rows = [(e.action, e.actor, e.task_ids, e.team_id) for e in await _audit(rt)]
    assert rows == [
        ("operator_add", "cli", [], None),  # the fixture's grant
        ("retry", "ops@site.test", [scene.acme_other], world.team),
        ("cancel", "ops@site.test", [scene.acme_waiting], world.team),
        ("operator_remove", "cli", [], None),
        ("operator_add", "cli", [], None),
    ]
    assert all(e.at == clock.now for e in await _audit(rt))
    # The console shows it: the whole trail, and a task's own actions on its page.
    trail = (await page.get("/ops/audit", headers=HTML)).text
    assert trail.count('data-action="operator_add"') == 2 and "Cancelled a task" in trail
    story = (await page.get(f"/ops/tasks/{scene.acme_other}", headers=HTML)).text
    assert 'data-action="retry"' in story and 'data-action="cancel"' not in story
    # A team admin sees their team's actions, not site-wide grants.
    admin_trail = (await (await page_as(world.admin)).get("/ops/audit", headers=HTML)).text
    assert 'data-action="retry"' in admin_trail and "operator_add" not in admin_trail


async def test_operator_role_is_removed_at_once(page_as, world, operator, rt) -> None:
    page = await page_as(operator)
    assert (await page.get("/ops", headers=HTML)).status_code == 200
    await operators.remove(rt, "ops@site.test")
    assert (await page.get("/ops", headers=HTML)).status_code == 404
