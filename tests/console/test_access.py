"""Who sees the console: every page and action for an operator, a team admin of this team and
of another team, staff, a customer and someone signed out. Anyone outside gets exactly what an
unknown address gets — for a page, its very bytes."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from desk.console import failures
from desk.people import operators
from tests.console.conftest import HTML

PAGES = [
    "/ops",
    "/ops/tasks",
    "/ops/tasks?status=FAILED",
    "/ops/failures",
    "/ops/workers",
    "/ops/lanes",
    "/ops/schedules",
    "/ops/audit",
]


async def _group_key(rt, scope_user: int) -> str:
    scope = await operators.scope_of(rt, scope_user)
    return next(g.key for g in await failures.groups(rt, scope) if "locked" in g.error)


async def _unknown(page) -> tuple[int, str]:
    r = await page.get("/ops-no-such-page", headers=HTML)
    return r.status_code, r.text


@pytest.mark.parametrize("who", ["staff", "customer", "anonymous"])
async def test_outsiders_get_the_unknown_address_page_everywhere(
    page_as, world, scene, operator, rt, who
) -> None:
    user = None if who == "anonymous" else getattr(world, who)
    page = await page_as(user)
    unknown = await _unknown(page)
    assert unknown[0] == 404
    key = await _group_key(rt, operator)
    task = scene.acme_failed[0]
    for url in [*PAGES, f"/ops/tasks/{task}", f"/ops/failures/{key}/retry"]:
        r = await page.get(url, headers=HTML)
        assert (r.status_code, r.text) == unknown, url
        assert (await page.hx_get(url)).status_code == 404, url
        assert (await page.get(url)).json() == {"detail": "Not Found"}, url  # as an API client
    for url in [
        f"/ops/tasks/{task}/retry",
        f"/ops/tasks/{scene.acme_waiting}/cancel",
        f"/ops/failures/{key}/retry",
        f"/ops/failures/{key}/cancel",
        "/ops/lanes/export/pause",
    ]:
        r = await page.hx_post(url, {"max_id": "999999"})
        assert r.status_code == 404, url
    async with rt.engine.connect() as conn:
        changed = await conn.execute(
            sa.text("SELECT count(*) FROM background_task WHERE status = 'WAITING' AND id = :t"),
            {"t": task},
        )
        audited = await conn.execute(sa.text("SELECT count(*) FROM ops_audit WHERE actor <> 'cli'"))
        assert (changed.scalar(), audited.scalar()) == (0, 0)


async def test_operator_sees_every_team_and_may_act(page_as, world, scene, operator, rt) -> None:
    page = await page_as(operator)
    for url in [*PAGES, f"/ops/tasks/{scene.globex_failed}", f"/ops/tasks/{scene.acme_other}"]:
        r = await page.get(url, headers=HTML)
        assert r.status_code == 200, url
        assert "Operator: every team" in r.text
        assert (await page.hx_get(url)).status_code == 200, url
    listing = await page.get("/ops/tasks?status=FAILED", headers=HTML)
    assert f'data-task-id="{scene.globex_failed}"' in listing.text
    assert f'data-task-id="{scene.acme_other}"' in listing.text
    key = await _group_key(rt, operator)
    confirm = await page.get(f"/ops/failures/{key}/retry", headers=HTML)
    assert confirm.status_code == 200 and "This retries 4 failed tasks." in confirm.text
    r = await page.hx_post(f"/ops/tasks/{scene.acme_other}/retry")
    assert r.status_code == 204 and r.headers["HX-Redirect"] == f"/ops/tasks/{scene.acme_other}"
    r = await page.hx_post(f"/ops/tasks/{scene.acme_waiting}/cancel")
    assert r.status_code == 204


async def test_team_admin_sees_their_team_only(page_as, world, scene, operator, rt) -> None:
    admin = await page_as(world.admin)
    for url in [*PAGES, f"/ops/tasks/{scene.acme_failed[0]}"]:
        r = await admin.get(url, headers=HTML)
        assert r.status_code == 200, url
        assert "Team admin: your team only" in r.text
    listing = await admin.get("/ops/tasks?status=FAILED", headers=HTML)
    assert f'data-task-id="{scene.acme_other}"' in listing.text
    assert f'data-task-id="{scene.globex_failed}"' not in listing.text
    unknown = await _unknown(admin)
    r = await admin.get(f"/ops/tasks/{scene.globex_failed}", headers=HTML)
    assert (r.status_code, r.text) == unknown
    assert (await admin.hx_post(f"/ops/tasks/{scene.globex_failed}/retry")).status_code == 404
    # The shared group counts only this team's tasks for them.
    key = await _group_key(rt, world.admin)
    confirm = await admin.get(f"/ops/failures/{key}/retry", headers=HTML)
    assert "This retries 3 failed tasks." in confirm.text
    # A lane serves every team: pausing one is an operator's call.
    assert (await admin.hx_post("/ops/lanes/export/pause")).status_code == 404
    assert (await admin.hx_post(f"/ops/tasks/{scene.acme_other}/retry")).status_code == 204


async def test_admin_of_another_team_gets_404_for_this_teams_objects(
    page_as, world, scene, operator, rt
) -> None:
    outsider = await page_as(world.outsider)  # admin of Globex
    unknown = await _unknown(outsider)
    for task in (scene.acme_failed[0], scene.acme_waiting):
        r = await outsider.get(f"/ops/tasks/{task}", headers=HTML)
        assert (r.status_code, r.text) == unknown
    assert (await outsider.hx_post(f"/ops/tasks/{scene.acme_failed[0]}/retry")).status_code == 404
    assert (await outsider.hx_post(f"/ops/tasks/{scene.acme_waiting}/cancel")).status_code == 404
    # The group exists for them only through their own task; acting on it leaves Acme alone.
    key = await _group_key(rt, world.outsider)
    r = await outsider.get(f"/ops/failures/{key}/retry", headers=HTML)
    assert "This retries 1 failed task." in r.text
    listing = await outsider.get("/ops/tasks", headers=HTML)
    assert f'data-task-id="{scene.globex_failed}"' in listing.text
    assert f'data-task-id="{scene.acme_waiting}"' not in listing.text


async def test_state_changes_need_the_csrf_token(page_as, world, scene, operator) -> None:
    page = await page_as(operator)
    r = await page.post(f"/ops/tasks/{scene.acme_other}/retry", headers={"HX-Request": "true"})
    assert r.status_code == 403


async def test_bad_input_is_a_4xx_saying_what_to_fix(page_as, world, scene, operator) -> None:
    page = await page_as(operator)
    r = await page.get("/ops/tasks?since=yesterday", headers=HTML)
    assert r.status_code == 422 and "2026-11-30T14:00" in r.text
    r = await page.get("/ops/tasks?kind=PIZZA", headers=HTML)
    assert r.status_code == 422 and "use one of" in r.text
    assert (await page.get("/ops/tasks/abc", headers=HTML)).status_code == 404
    r = await page.get("/ops/tasks?before=soon", headers=HTML)
    assert r.status_code == 400 and "before" in r.text
    assert (await page.get("/ops/failures/zzz/retry", headers=HTML)).status_code == 404
    r = await page.hx_post(f"/ops/tasks/{scene.acme_waiting}/retry")
    assert r.status_code == 422 and "only a failed task" in r.text


@pytest.mark.parametrize(
    "query",
    [
        "person=a%00b",
        "error=a%00b",
        "team=%C2%B2",  # `²` passes str.isdigit() but not int()
        "team=" + "9" * 5000,  # beyond int4
    ],
)
async def test_odd_characters_in_the_task_search_are_a_4xx(
    page_as, world, operator, query: str
) -> None:
    page = await page_as(operator)
    r = await page.get(f"/ops/tasks?{query}", headers=HTML)
    assert r.status_code == 422, r.text[:300]
    assert query.split("=")[0] in r.text
