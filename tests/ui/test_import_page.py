"""The admin "Import tickets" page: upload + start in one request with the Queued row in the
answer, a second submit attaching to the running import, bad files as 4xx messages in the form,
CSRF, who may see it (everyone else gets exactly the unknown-address answer), and the IMPORT
task row (file and mode, progress with ETA, summary, rejected-rows report)."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re

import pytest
import sqlalchemy as sa

from desk.imports import service as imports
from desk.reads import tasks as reads
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from ui import i18n

HEADER = "external_id,title,status,priority,assignee_email\n"
GOOD = (
    HEADER + "EXT-1,Printer jam,OPEN,LOW,chen@acme.test\nEXT-2,VPN down,PENDING,HIGH,\n"
).encode()
ONE_BAD = GOOD + b"EXT-3,Mystery,DONE,LOW,\n"  # row 4: unknown status
HTML = {"Accept": "text/html"}


def form(page, data: bytes = GOOD, mode: str = "create", name: str = "tickets.csv") -> dict:
    return {"data": {"mode": mode}, "files": {"file": (name, data, "text/csv")}}


async def submit(page, team: int, **kw):
    return await page.hx_post(f"/imports?team_id={team}", **form(page, **kw))


async def uploads(rt) -> int:
    async with rt.engine.connect() as conn:
        return (await conn.execute(sa.text("SELECT count(*) FROM upload"))).scalar_one()


async def import_tasks(rt, world) -> list:
    """The ledger's rows (with their round) of the imports the list shows."""
    page = await reads.list_tasks(rt.pg, world.admin, world.team, kind="IMPORT")
    return [await tasks.get_task(rt, world.admin, t.id) for t in page.items]


def row_html(html: str, task_id: int) -> str:
    start = html.index(f'id="task-{task_id}"')
    return html[start : html.index("</li>", start)]


async def test_admin_sees_the_page_from_the_navigation(page_as, world, app) -> None:
    zhou = await page_as(world.admin)
    nav = (await zhou.get("/tickets")).text
    assert 'href="/members"' in nav and 'href="/imports"' in nav and 'href="/tokens"' in nav
    r = await zhou.get("/imports")
    assert r.status_code == 200
    assert "<h1>Import tickets</h1>" in r.text and "Acme" in r.text
    assert 'enctype="multipart/form-data"' in r.text and 'type="file"' in r.text
    assert f'name="csrf_token" value="{zhou.csrf}"' in r.text
    assert f'hx-post="/imports?team_id={world.team}"' in r.text
    assert 'value="create" checked' in r.text and 'value="upsert"' in r.text
    assert "add new tickets only" in r.text and "title, status, priority and assignee" in r.text
    assert "<code>id, title, status, priority, assignee_email, creator_email, created_at" in r.text
    assert "external_id" in r.text and "Up to 50 MiB" in r.text
    assert "No imports yet." in r.text


async def test_admin_uploads_and_the_queued_row_comes_back(page_as, world, rt, clock) -> None:
    zhou = await page_as(world.admin)
    r = await submit(zhou, world.team, mode="upsert", name="from-zendesk.csv")
    assert r.status_code == 202, r.text
    (task,) = await import_tasks(rt, world)
    assert task.status == "WAITING" and task.filters["mode"] == "upsert"
    assert task.filters["filename"] == "from-zendesk.csv"
    assert f"Import #{task.id} is queued" in r.text
    assert 'id="tasks" hx-swap-oob="innerHTML"' in r.text  # the list, refreshed in place
    row = row_html(r.text, task.id)
    assert 'data-status="Queued"' in row and "data-poll" in row
    assert 'data-delay="1"' in row  # the same schedule as every row
    assert "Import" in row and "from-zendesk.csv" in row and "update existing ones" in row
    assert 'data-list="imports"' in r.text  # the list looks for imports only

    assert await execute(rt, registry(), task.id, task.run) == "done"
    r = await zhou.hx_get(f"/tasks/{task.id}?since={clock.now.timestamp()}")
    assert 'data-status="Completed"' in r.text and "data-poll" not in r.text
    assert "2 created, 0 updated, 0 unchanged, 0 rejected." in r.text
    assert "/report" not in r.text  # nothing was rejected
    assert json.loads(r.headers["HX-Trigger"])["task-finished"]["kind"] == "IMPORT"
    # The tasks page lists it too.
    assert f'id="task-{task.id}"' in (await zhou.get("/tasks")).text


def controls_tag(html: str) -> str:
    start = html.index('<div id="import-controls"')
    return html[start : html.index(">", start)]


def controls_poll(html: str) -> tuple[str | None, str | None]:
    """(hx-trigger, hx-get) of the form's controls as rendered."""
    tag = controls_tag(html)
    trigger, url = (re.search(f'{name}="([^"]*)"', tag) for name in ("hx-trigger", "hx-get"))
    return (
        trigger.group(1) if trigger else None,
        url.group(1).replace("&amp;", "&") if url else None,
    )


async def test_the_controls_poll_on_the_rows_schedule_and_stop(page_as, world, rt, clock) -> None:
    """docs/architecture.md, "Polling": 1, 1, 2, 2, 5, 5, 5, then 10 s from when the page began
    watching (`since`, in the URL), none after ten minutes (Refresh instead) and none once the
    import has ended; ui.js holds the poll of a hidden tab (`data-poll-self`)."""
    # A time the URL's milliseconds would round up: each age must still reach its step.
    clock.now = clock.now.replace(microsecond=999_999)
    zhou = await page_as(world.admin)
    r = await submit(zhou, world.team)  # the answer's controls (out of band) start the schedule
    trigger, url = controls_poll(r.text)
    assert "data-poll-self" in controls_tag(r.text) and url is not None
    seen = [trigger]
    for step in (1, 1, 2, 2, 5, 5, 5, 10, 10):  # each poll on time
        clock.advance(step)
        r = await zhou.hx_get(url)
        assert r.status_code == 200 and "is queued" in r.text
        trigger, url = controls_poll(r.text)
        seen.append(trigger)
    delays = [1, 1, 2, 2, 5, 5, 5, 10, 10, 10]
    assert seen == [f"load delay:{d}s, resume" for d in delays]
    page = await zhou.get("/imports")  # a reload starts the schedule again
    assert controls_poll(page.text)[0] == "load delay:1s, resume"

    clock.advance(600)  # ten minutes of watching: no more polls, a Refresh button instead
    r = await zhou.hx_get(url)
    assert controls_poll(r.text) == (None, None) and "data-poll-self" not in controls_tag(r.text)
    assert "Stopped checking automatically." in r.text
    refresh = re.search(r'<button type="button" hx-get="([^"]+)"', r.text).group(1)
    r = await zhou.hx_get(refresh.replace("&amp;", "&"))
    assert controls_poll(r.text)[0] == "load delay:1s, resume"  # and it starts again

    (task,) = await import_tasks(rt, world)
    assert await execute(rt, registry(), task.id, task.run) == "done"
    _, url = controls_poll(r.text)
    r = await zhou.hx_get(url)
    assert controls_poll(r.text) == (None, None) and "import-busy" not in r.text
    assert "hx-get" not in r.text and "data-poll-self" not in r.text  # finished: nothing polls


async def test_a_plain_form_post_carries_the_token_as_a_field(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    r = await zhou.post(
        f"/imports?team_id={world.team}",
        data={"csrf_token": zhou.csrf, "mode": "create"},
        files={"file": ("t.csv", GOOD, "text/csv")},
    )
    assert r.status_code == 303 and r.headers["location"] == "/imports"
    assert len(await import_tasks(rt, world)) == 1


async def test_without_the_token_nothing_is_stored(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    for headers in ({"HX-Request": "true"}, {"HX-Request": "true", "X-CSRF-Token": "forged"}):
        r = await zhou.post(
            f"/imports?team_id={world.team}",
            data={"mode": "create"},
            files={"file": ("t.csv", GOOD, "text/csv")},
            headers=headers,
        )
        assert r.status_code == 403 and "out of date" in r.text
    assert await uploads(rt) == 0 and await import_tasks(rt, world) == []


async def test_a_second_submit_attaches_to_the_running_import(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    first = await submit(zhou, world.team)
    (task,) = await import_tasks(rt, world)
    r = await submit(zhou, world.team, data=ONE_BAD)
    assert r.status_code == 409 and first.status_code == 202
    assert f"An import is already running for this team — following it (#{task.id})." in r.text
    assert 'data-status="Queued"' in row_html(r.text, task.id)
    assert [t.id for t in await import_tasks(rt, world)] == [task.id]
    assert await uploads(rt) == 1  # the second file was not kept
    assert await execute(rt, registry(), task.id, task.run) == "done"
    assert (await submit(zhou, world.team)).status_code == 202  # once it ended, a new one starts


async def test_a_double_click_makes_one_import(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    answers = await asyncio.gather(*(submit(zhou, world.team) for _ in range(4)))
    assert sorted(r.status_code for r in answers) == [202, 409, 409, 409]
    (task,) = await import_tasks(rt, world)
    assert all(f"#{task.id}" in r.text for r in answers)


@pytest.mark.parametrize("who", ["staff", "customer"])
async def test_staff_and_customers_get_exactly_a_missing_page(page_as, world, rt, who) -> None:
    page = await page_as(getattr(world, who))
    assert 'href="/imports"' not in (await page.get("/tickets")).text
    for method, url in [("GET", "/imports"), ("POST", f"/imports?team_id={world.team}")]:
        for hx in (False, True):
            answers = []
            for target in (url, "/no-such-page"):
                if method == "GET":
                    r = await (page.hx_get(target) if hx else page.get(target, headers=HTML))
                elif hx:
                    r = await page.hx_post(target, **form(page))
                else:
                    r = await page.post(
                        target,
                        data={"csrf_token": page.csrf, "mode": "create"},
                        files={"file": ("t.csv", GOOD, "text/csv")},
                        headers=HTML,
                    )
                answers.append((r.status_code, r.text, r.headers.get("hx-retarget")))
            assert answers[0] == answers[1], (method, url, hx)
            assert answers[0][0] == 404 and "Not found" in answers[0][1]
    r = await page.get("/imports")  # a script (no text/html): the JSON of any unknown address
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
    assert await uploads(rt) == 0


async def test_another_teams_admin_cannot_import_into_or_see_this_team(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    assert (await submit(zhou, world.team, data=ONE_BAD)).status_code == 202
    (task,) = await import_tasks(rt, world)
    olga = await page_as(world.outsider)  # admin of Globex
    r = await submit(olga, world.team)
    missing = await olga.hx_post("/no-such-page", **form(olga))
    assert r.status_code == 404 and r.text == missing.text
    assert await uploads(rt) == 1
    r = await olga.get("/imports")
    assert r.status_code == 200 and "Globex" in r.text and f'id="task-{task.id}"' not in r.text
    assert (await olga.hx_get(f"/tasks/{task.id}")).status_code == 404
    assert (await olga.get(f"/tasks/{task.id}/report")).status_code == 404
    # Chen is staff of Acme: he sees neither Zhou's import nor its report.
    chen = await page_as(world.staff)
    assert (await chen.hx_get(f"/tasks/{task.id}")).status_code == 404
    assert f'id="task-{task.id}"' not in (await chen.get("/tasks")).text


@pytest.mark.parametrize(
    "data, name, status, message",
    [
        (b"", "empty.csv", 422, "the file is empty"),
        (b"", "", 422, "Choose a CSV file to import."),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00IHDR", "photo.png", 422, "this is not a CSV file"),
        (b"name,age\nx,1\n", "people.csv", 422, "with title and external_id (or id)"),
        (HEADER.encode() + b"x" * 3000, "big.csv", 413, "larger than the limit of 2 KiB"),
        (HEADER.encode() + b"x" * 200_000, "huge.csv", 413, "larger than the limit of 2 KiB"),
    ],
)
async def test_bad_files_get_their_reason_in_the_form(
    page_as, world, rt, app, data, name, status, message
) -> None:
    app.state.runtime.settings = app.state.runtime.settings.model_copy(
        update={"import_max_bytes": 2048}
    )
    zhou = await page_as(world.admin)
    r = await submit(zhou, world.team, data=data, name=name)
    assert r.status_code == status and message in r.text, r.text
    assert 'role="alert"' in r.text and "<html" not in r.text and "HX-Retarget" not in r.headers
    assert "hx-swap-oob" not in r.text
    r = await zhou.post(  # without htmx: the whole page, with the message in the form
        f"/imports?team_id={world.team}",
        data={"csrf_token": zhou.csrf, "mode": "create"},
        files={"file": (name, data, "text/csv")},
    )
    assert r.status_code == status and message in r.text and "<h1>Import tickets</h1>" in r.text
    assert r.text.count('id="tasks"') == 1
    assert await uploads(rt) == 0 and await import_tasks(rt, world) == []


async def test_an_unreadable_upload_and_a_bad_mode_are_4xx(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    r = await zhou.hx_post(
        f"/imports?team_id={world.team}",
        content=b"garbage",
        headers={"Content-Type": "multipart/form-data"},
    )
    assert r.status_code == 400 and "could not be read" in r.text
    r = await submit(zhou, world.team, mode="merge")
    assert r.status_code == 422 and "use create (add new tickets only) or upsert" in r.text
    assert await import_tasks(rt, world) == []


async def _start(rt, world, data: bytes, mode: str = "create", name: str = "legacy.csv"):
    upload = await imports.store_upload(rt, world.admin, world.team, name, data)
    return await imports.start_import(rt, world.admin, world.team, upload.id, mode)


async def test_running_row_shows_file_mode_rows_and_eta(page_as, world, rt, clock) -> None:
    task = await _start(rt, world, GOOD, mode="create")
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'RUNNING', attempts = 1, progress = 0.25, "
                "progress_current = 500, progress_total = 2000, started_at = :t, "
                "stats = CAST(:s AS jsonb) WHERE id = :id"
            ),
            {"t": clock.now, "id": task.id, "s": json.dumps({"created": 480, "rejected": 20})},
        )
    clock.advance(20)
    zhou = await page_as(world.admin)
    r = await zhou.hx_get(f"/tasks/{task.id}?since={clock.now.timestamp() - 20}")
    assert 'data-status="Running"' in r.text and 'data-delay="5"' in r.text
    assert "Import" in r.text and "legacy.csv" in r.text and "add new tickets only" in r.text
    assert "500 / 2,000 rows" in r.text and 'value="25"' in r.text and "about 60 s left" in r.text
    assert "rejected" not in r.text and "/report" not in r.text  # the summary comes at the end
    page = (await zhou.get("/imports")).text
    assert "500 / 2,000 rows" in row_html(page, task.id)


async def test_finished_row_with_rejections_links_the_report(page_as, world, rt, clock) -> None:
    task = await _start(rt, world, ONE_BAD)
    assert await execute(rt, registry(), task.id, task.run) == "done"
    zhou = await page_as(world.admin)
    for html in ((await zhou.hx_get(f"/tasks/{task.id}")).text, (await zhou.get("/imports")).text):
        row = row_html(html, task.id)
        assert 'data-status="Completed"' in row and "3 / 3 rows" not in row
        assert "2 created, 0 updated, 0 unchanged, 1 rejected." in row
        assert f'href="/tasks/{task.id}/report"' in row and "Download rejected rows" in row
    r = await zhou.get(f"/tasks/{task.id}/report")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert rows[0] == ["row", "column", "reason"] and rows[1][:2] == ["4", "status"]
    assert "DONE" in rows[1][2]


async def test_failed_import_shows_the_reason_and_what_was_done(page_as, world, rt) -> None:
    task = await _start(rt, world, GOOD)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'FAILED', attempts = 5, finished_at = now(), "
                "last_error = 'The uploaded file is no longer stored; upload it again.', "
                "stats = CAST(:s AS jsonb) WHERE id = :id"
            ),
            {
                "id": task.id,
                "s": json.dumps({"created": 1, "updated": 0, "unchanged": 0, "rejected": 2}),
            },
        )
    r = await (await page_as(world.admin)).hx_get(f"/tasks/{task.id}")
    assert "Failed" in r.text and "no longer stored" in r.text and "Retry" in r.text
    assert "1 created, 0 updated, 0 unchanged, 2 rejected." in r.text
    assert f'href="/tasks/{task.id}/report"' in r.text


async def test_the_list_looks_for_new_imports_only(page_as, world, rt) -> None:
    zhou = await page_as(world.admin)
    r = await zhou.hx_get("/imports?newer_than=0&limit=8")
    assert r.status_code == 204
    await tasks.create_export(rt, world.admin, world.team, {})  # not an import
    assert (await zhou.hx_get("/imports?newer_than=0&limit=8")).status_code == 204
    task = await _start(rt, world, GOOD)
    r = await zhou.hx_get("/imports?newer_than=0&limit=8")
    assert r.status_code == 200 and f'id="task-{task.id}"' in r.text
    assert "<html" not in r.text and f'data-newest="{task.id}"' in r.text
    assert (await zhou.hx_get(f"/imports?newer_than={task.id}")).status_code == 204


async def test_the_page_and_rows_are_fully_translated(page_as, world, rt, app) -> None:
    zh = i18n.catalog("zh_Hans")
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    done = await _start(rt, world, ONE_BAD, mode="upsert")
    assert await execute(rt, registry(), done.id, done.run) == "done"
    zh.missing.clear()
    zhou = await page_as(world.admin)
    r = await zhou.get("/imports")
    assert r.status_code == 200 and 'lang="zh-Hans"' in r.text and "导入工单" in r.text
    row = row_html(r.text, done.id)
    assert "新建 2，更新 0，未变 0，拒绝 1。" in row and "下载被拒绝的行" in row  # noqa: RUF001
    assert (await submit(zhou, world.team)).status_code == 202
    assert (await submit(zhou, world.team)).status_code == 409
    for data, name in ((b"", "x.csv"), (b"", ""), (b"\x00\x01", "x.bin")):
        assert (await submit(zhou, world.team, data=data, name=name)).status_code == 422
    app.state.runtime.settings = app.state.runtime.settings.model_copy(
        update={"import_max_bytes": 2048}
    )
    assert (await submit(zhou, world.team, data=b"x" * 4096)).status_code == 413
    await zhou.hx_get("/tasks")
    assert zh.missing == set()
