"""Plain routes: the export download, import uploads and reports, /health — who is allowed,
who is refused (as not found), and clear 4xx answers for bad input."""

from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.api.tokens import bearer
from web.auth import start_session

CSV = b"external_id,title,status\nR-1,Routed,OPEN\nR-2,,OPEN\n"


async def test_download_owner_only(client, world):
    rt = client.rt
    task = await tasks.create_export(rt, world.customer, world.team, {})
    await execute(rt, registry(), task.id, task.run)
    ok = await client.get(
        f"/tasks/{task.id}/download", headers=await bearer(client, world.customer)
    )
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/csv")
    assert b"Cannot log in" in ok.content and "attachment" in ok.headers["content-disposition"]
    for other in (world.admin, world.staff, world.customer2, world.outsider):
        refused = await client.get(
            f"/tasks/{task.id}/download", headers=await bearer(client, other)
        )
        missing = await client.get("/tasks/999999/download", headers=await bearer(client, other))
        assert refused.status_code == missing.status_code == 404
        assert refused.json() == missing.json()
    anon = await client.get(f"/tasks/{task.id}/download")
    assert anon.status_code == 401 and anon.json()["error"]["code"] == "UNAUTHENTICATED"
    bad_token = await client.get(
        f"/tasks/{task.id}/download", headers={"Authorization": "Bearer tdk_nope"}
    )
    assert bad_token.status_code == 401


async def test_upload_start_and_report(client, world):
    rt = client.rt
    admin = await bearer(client, world.admin)
    up = await client.post(
        f"/teams/{world.team}/imports/uploads",
        headers=admin,
        files={"file": ("t.csv", CSV, "text/csv")},
    )
    assert up.status_code == 201, up.text
    from desk.imports import service as imports

    task = await imports.start_import(rt, world.admin, world.team, up.json()["uploadId"], "create")
    await execute(rt, registry(), task.id, task.run)
    report = await client.get(f"/tasks/{task.id}/report", headers=admin)
    assert report.status_code == 200 and "3,title,missing" in report.text
    for refused in (world.staff, world.customer, world.outsider):
        r = await client.get(f"/tasks/{task.id}/report", headers=await bearer(client, refused))
        assert r.status_code == 404


async def test_upload_refusals(client, world):
    staff = await client.post(
        f"/teams/{world.team}/imports/uploads",
        headers=await bearer(client, world.staff),
        files={"file": ("t.csv", CSV)},
    )
    assert staff.status_code == 403
    outsider = await client.post(
        f"/teams/{world.team}/imports/uploads",
        headers=await bearer(client, world.outsider),
        files={"file": ("t.csv", CSV)},
    )
    assert outsider.status_code == 404
    admin = await bearer(client, world.admin)
    junk = await client.post(
        f"/teams/{world.team}/imports/uploads",
        headers=admin,
        files={"file": ("x.png", b"\x89PNG\x00\x00")},
    )
    assert junk.status_code == 422 and "not a CSV" in junk.json()["error"]["message"]
    no_file = await client.post(
        f"/teams/{world.team}/imports/uploads", headers=admin, data={"x": "1"}
    )
    assert no_file.status_code == 422 and no_file.json()["error"]["field"] == "x"  # not ours
    no_file = await client.post(
        f"/teams/{world.team}/imports/uploads", headers=admin, data={"csrf_token": "1"}
    )
    assert no_file.status_code == 422 and "file" in no_file.json()["error"]["message"]


async def test_cookie_upload_needs_the_csrf_token(client, world):
    from starlette.responses import Response

    resp = Response()
    csrf = await start_session(client.rt, resp, world.admin)
    cookie = resp.headers["set-cookie"].split(";")[0]
    url = f"/teams/{world.team}/imports/uploads"
    refused = await client.post(url, headers={"Cookie": cookie}, files={"file": ("t.csv", CSV)})
    assert refused.status_code == 403
    ok = await client.post(
        url, headers={"Cookie": cookie, "X-CSRF-Token": csrf}, files={"file": ("t.csv", CSV)}
    )
    assert ok.status_code == 201


async def test_health_is_503_without_workers(client):
    r = await client.get("/health")
    assert r.status_code == 503
    body = r.json()
    assert body["redis"] is True and body["workers"] == 0 and body["ok"] is False


async def test_bodies_over_the_limit_are_refused_before_reading(client, world):
    r = await client.post(
        "/login",
        content=b"x" * 16,
        headers={
            "Content-Length": str(client.rt.settings.import_max_bytes + 1),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    # A page: the sign-in form's own limit, as a page message (not JSON).
    assert r.status_code == 413 and "at most 16 KiB" in r.text
    assert r.headers["content-type"].startswith("text/html")


async def test_an_upload_named_with_odd_characters_is_kept_not_a_500(client, world):
    # The multipart filename is the client's: NUL (PostgreSQL refuses it in text) and other
    # controls are dropped from the label; the file itself is what gets checked.
    admin = await bearer(client, world.admin)
    for sent, kept in ((b"a\x00b.csv", "ab.csv"), (b"\x01\x7f", "upload.csv")):
        body = (
            b'--b1\r\nContent-Disposition: form-data; name="file"; filename="' + sent + b'"\r\n'
            b"Content-Type: text/csv\r\n\r\n" + CSV + b"\r\n--b1--\r\n"
        )
        r = await client.post(
            f"/teams/{world.team}/imports/uploads",
            headers={**admin, "Content-Type": "multipart/form-data; boundary=b1"},
            content=body,
        )
        assert r.status_code == 201, r.text
        assert r.json()["filename"] == kept


async def test_a_csv_without_ticket_columns_fails_its_import_saying_why(client, world):
    """The API takes any non-blank text without NUL (what its document can say); the columns
    are checked when the import runs, and a file without them fails it with the reason."""
    admin = await bearer(client, world.admin)
    started = await client.post(
        "/api/v1/imports",
        headers=admin,
        data={"team_id": str(world.team)},
        files={"file": ("t.csv", b"name,colour\nx,red\n", "text/csv")},
    )
    assert started.status_code == 202, started.text
    task_id = started.json()["task_id"]
    task = await tasks.get_task(client.rt, world.admin, task_id)
    await execute(client.rt, registry(), task.id, task.run)
    done = (await client.get(f"/api/v1/tasks/{task_id}", headers=admin)).json()
    assert done["status"] == "failed" and "not a ticket CSV" in done["message"], done
