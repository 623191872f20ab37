"""Small things a new user trips over: a task whose worker died says so, the ETA waits for
enough progress, counts are formatted, the import form says which import is running before
anyone uploads, and every error page — the download's 404 too — is the styled one."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from desk.core.models import BackgroundTask
from desk.imports import service as imports
from desk.work import tasks
from tests.factories import add_ticket
from ui import taskview

HTML = {"Accept": "text/html"}


async def _set(rt, task_id: int, **values) -> None:
    sets = ", ".join(f"{k} = :{k}" for k in values)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(f"UPDATE background_task SET {sets} WHERE id = :id"), {"id": task_id, **values}
        )


async def test_running_task_whose_lease_ran_out_says_worker_lost(page_as, world, rt, clock) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    await _set(
        rt, task.id, status="RUNNING", attempts=1, started_at=clock(),
        lease_until=clock() + timedelta(seconds=30),
    )  # fmt: skip
    page = await page_as(world.staff)
    row = (await page.hx_get(f"/tasks/{task.id}")).text
    assert 'data-status="Running"' in row and "Worker lost" not in row
    clock.advance(31)  # nobody renewed the lease: the worker is gone
    row = (await page.hx_get(f"/tasks/{task.id}")).text
    assert 'data-status="Worker lost"' in row and " data-active data-poll data-since=" in row
    assert "Worker lost — resumes when a worker is back." in row


def _running(done: int, total: int, started: float, now) -> BackgroundTask:
    return BackgroundTask(
        id=1, kind="IMPORT", team_id=1, owner_id=1, scope_key="s", status="RUNNING",
        progress=done / total, progress_current=done, progress_total=total,
        started_at=now - timedelta(seconds=started), run_at=now, created_at=now,
    )  # fmt: skip


def test_eta_waits_for_enough_progress(clock) -> None:
    now = clock()

    def eta(done: int, started: float) -> int | None:
        return taskview.build(_running(done, 1000, started, now), viewer_id=1, now=now).eta_seconds

    assert eta(400, 3) is None  # 40 % after 3 s: too early to extrapolate
    assert eta(20, 60) is None  # 2 % after a minute: start-up still dominates
    assert eta(50, 10) == 190  # 5 % after 10 s: 950 rows at 5 rows/s
    assert eta(500, 100) == 100


async def test_ticket_count_is_formatted(page_as, world, rt) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO ticket (team_id, title, creator_id) "
                "SELECT :t, 'Bulk item ' || chr(65 + g % 26), :c FROM generate_series(1, 1200) g"
            ),
            {"t": world.team, "c": world.customer},
        )
    html = (await (await page_as(world.staff)).get("/tickets?q=Bulk")).text
    assert "1,200 tickets match" in html and "1200 tickets" not in html


async def test_import_form_says_which_import_runs_before_any_upload(page_as, world, rt) -> None:
    data = b"external_id,title\nE1,One\n"
    task = await imports.submit_import(rt, world.admin, world.team, "big.csv", data, "create")
    page = await page_as(world.admin)
    html = (await page.get("/imports")).text
    assert f"Import #{task.id} is queued; you can upload the next file" in html
    await _set(rt, task.id, status="RUNNING", progress=0.42, attempts=1)
    html = (await page.get("/imports")).text
    assert f"Import #{task.id} is running (42 %)" in html
    controls = html[html.index('id="import-controls"') :]
    assert '<fieldset class="plain" disabled>' in controls  # no file can be picked meanwhile
    assert 'hx-get="/imports/controls' in controls  # and it follows that import
    await _set(rt, task.id, status="COMPLETED", progress=1.0)
    after = (await page.hx_get(f"/imports/controls?team_id={world.team}")).text
    assert "is running" not in after and "disabled" not in after and "hx-get" not in after


async def test_the_download_404_is_the_styled_error_page(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.get("/tasks/99999/download", headers=HTML)
    assert r.status_code == 404
    assert '<link rel="stylesheet" href="/static/ui.css">' in r.text
    assert "Export file not found" in r.text or "Task not found" in r.text
    api = await page.get("/tasks/99999/download", headers={"Accept": "application/json"})
    assert api.status_code == 404 and api.json()["error"]["code"] == "NOT_FOUND"


async def test_the_report_of_someone_elses_import_is_styled_too(page_as, world, rt) -> None:
    await add_ticket(rt, world.team, world.customer, "x")
    r = await (await page_as(world.customer)).get("/tasks/12345/report", headers=HTML)
    assert r.status_code == 404 and "/static/ui.css" in r.text


async def test_other_refusals_are_styled_pages_for_browsers(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.get("/logout", headers=HTML)  # sign-out is a POST
    assert r.status_code == 405 and "/static/ui.css" in r.text
    assert "does not take that kind of request" in r.text and "POST" in r.headers["allow"]
    api = await page.get("/logout", headers={"Accept": "application/json"})
    assert api.status_code == 405 and api.json() == {"detail": "Method Not Allowed"}


async def test_a_bug_is_a_styled_500_page_for_browsers(app, world) -> None:
    import httpx

    async def boom() -> None:
        raise RuntimeError("a bug")

    app.add_api_route("/boom-for-test", boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        r = await client.get("/boom-for-test", headers=HTML)
        assert r.status_code == 500 and "/static/ui.css" in r.text
        assert "The server had a problem" in r.text and "a bug" not in r.text
        plain = await client.get("/boom-for-test")
        assert plain.status_code == 500 and plain.text == "Internal Server Error"


async def test_error_pages_of_plain_routes_speak_the_readers_language(page_as, world, rt) -> None:
    # A Chinese reader whose browser asks for English: their own setting decides, as on pages.
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'zh-CN' WHERE id = :u"), {"u": world.staff}
        )
    page = await page_as(world.staff)
    english = HTML | {"Accept-Language": "en-US,en;q=0.9"}
    for path in ("/tasks/99999/download", "/no-such-page"):
        r = await page.get(path, headers=english)
        assert r.status_code == 404, path
        assert 'lang="zh-Hans"' in r.text and "Not found" not in r.text, path
        assert 'action="/logout"' in r.text, path  # the signed-in header, as on every page
    r = await page.get("/logout", headers=english)
    assert r.status_code == 405 and "does not take that kind of request" not in r.text
    signed_out = await page.get("/no-such-page", headers=english | {"Cookie": "x=1"})
    assert signed_out.status_code == 404 and "Not found" in signed_out.text  # the browser's
