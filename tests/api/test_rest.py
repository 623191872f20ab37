"""The REST API (/api/v1): the trigger contract, visibility for every role (forbidden answers
exactly like missing), cookie writes need CSRF, typed JSON errors, idempotency keys."""

from starlette.responses import Response

from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.api.tokens import bearer
from web.auth import start_session

CSV = b"external_id,title,status\nR-1,Routed,OPEN\nR-2,,OPEN\n"


async def test_an_export_is_started_followed_and_downloaded(client, world):
    me = await bearer(client, world.staff)
    started = await client.post(
        "/api/v1/exports", headers=me, json={"team_id": world.team, "status": "OPEN"}
    )
    assert started.status_code == 202, started.text
    body = started.json()
    assert body == {"task_id": body["task_id"], "status": "queued"}
    assert started.headers["location"] == f"/api/v1/tasks/{body['task_id']}"

    again = await client.post(
        "/api/v1/exports", headers=me, json={"team_id": world.team, "status": ["OPEN"]}
    )
    assert again.status_code == 409
    assert again.json()["task_id"] == body["task_id"] and again.json()["status"] == "queued"
    assert again.json()["error"]["code"] == "TASK_CONFLICT"

    queued = (await client.get(started.headers["location"], headers=me)).json()
    assert queued["status"] == "queued" and queued["kind"] == "EXPORT"
    assert queued["progress"] == 0 and queued["download_url"] is None

    await execute(client.rt, registry(), body["task_id"], 1)
    done = (await client.get(f"/api/v1/tasks/{body['task_id']}", headers=me)).json()
    assert done["status"] == "succeeded" and done["progress"] == 1
    assert done["message"] == done["result_summary"] and "row" in done["message"]
    assert done["download_url"] == f"/tasks/{body['task_id']}/download"
    csv = await client.get(done["download_url"], headers=me)
    assert csv.status_code == 200 and b"Cannot log in" in csv.content


async def test_every_member_may_export_and_an_outsider_may_not(client, world):
    for member in (world.admin, world.staff, world.customer):
        got = await client.post(
            "/api/v1/exports",
            headers=await bearer(client, member),
            json={"team_id": world.team, "priority": ["URGENT", "HIGH"]},
        )
        assert got.status_code == 202, (member, got.text)
    outsider = await bearer(client, world.outsider)
    refused = await client.post("/api/v1/exports", headers=outsider, json={"team_id": world.team})
    missing = await client.post("/api/v1/exports", headers=outsider, json={"team_id": 999999})
    assert refused.status_code == missing.status_code == 404
    assert refused.content == missing.content


async def test_a_task_you_may_not_see_answers_like_a_missing_one(client, world):
    rt = client.rt
    export = await tasks.create_export(rt, world.customer, world.team, {})
    reminder = await reminders.schedule_reminder(
        rt, world.staff, world.tickets["login"], in_minutes=30
    )
    seen = {
        export.id: {world.customer},
        reminder.id: {world.admin, world.staff},
    }
    everyone = (world.admin, world.staff, world.customer, world.customer2, world.outsider)
    for task_id, allowed in seen.items():
        for user in everyone:
            headers = await bearer(client, user)
            got = await client.get(f"/api/v1/tasks/{task_id}", headers=headers)
            if user in allowed:
                assert got.status_code == 200, (task_id, user)
                assert got.json()["task_id"] == task_id
                continue
            missing = await client.get("/api/v1/tasks/999999", headers=headers)
            assert got.status_code == missing.status_code == 404, (task_id, user)
            assert got.content == missing.content
    scheduled = await client.get(
        f"/api/v1/tasks/{reminder.id}", headers=await bearer(client, world.admin)
    )
    assert scheduled.json()["status"] == "scheduled" and scheduled.json()["kind"] == "REMINDER"


async def test_the_list_shows_what_the_reader_may_see(client, world):
    rt = client.rt
    mine = await tasks.create_export(rt, world.customer, world.team, {})
    theirs = await tasks.create_export(rt, world.customer2, world.team, {})
    own = await tasks.create_export(rt, world.staff, world.team, {})
    await reminders.schedule_reminder(rt, world.staff, world.tickets["login"], in_minutes=30)
    page = await client.get(
        "/api/v1/tasks",
        params={"team_id": world.team, "first": 1},
        headers=await bearer(client, world.customer),
    )
    assert page.status_code == 200
    assert [t["task_id"] for t in page.json()["items"]] == [mine.id]
    assert page.json()["next_cursor"] is None
    assert theirs.id not in [t["task_id"] for t in page.json()["items"]]

    staff = await bearer(client, world.staff)
    first = (
        await client.get("/api/v1/tasks", params={"team_id": world.team, "first": 1}, headers=staff)
    ).json()
    assert [t["kind"] for t in first["items"]] == ["REMINDER"] and first["next_cursor"]
    rest = await client.get(
        "/api/v1/tasks",
        params={"team_id": world.team, "after": first["next_cursor"]},
        headers=staff,
    )
    assert [t["task_id"] for t in rest.json()["items"]] == [own.id]
    assert rest.json()["next_cursor"] is None
    exports = await client.get(
        "/api/v1/tasks", params={"team_id": world.team, "kind": "EXPORT"}, headers=staff
    )
    assert [t["task_id"] for t in exports.json()["items"]] == [own.id]

    outsider = await bearer(client, world.outsider)
    refused = await client.get("/api/v1/tasks", params={"team_id": world.team}, headers=outsider)
    missing = await client.get("/api/v1/tasks", params={"team_id": 999999}, headers=outsider)
    assert refused.status_code == missing.status_code == 404
    assert refused.content == missing.content


async def test_an_import_starts_from_one_multipart_request(client, world):
    admin = await bearer(client, world.admin)
    form = {"team_id": str(world.team), "mode": "create"}
    started = await client.post(
        "/api/v1/imports", headers=admin, data=form, files={"file": ("t.csv", CSV, "text/csv")}
    )
    assert started.status_code == 202, started.text
    task_id = started.json()["task_id"]
    again = await client.post(
        "/api/v1/imports", headers=admin, data=form, files={"file": ("t.csv", CSV, "text/csv")}
    )
    assert again.status_code == 409 and again.json()["task_id"] == task_id
    await execute(client.rt, registry(), task_id, 1)
    done = (await client.get(f"/api/v1/tasks/{task_id}", headers=admin)).json()
    assert done["status"] == "succeeded" and done["kind"] == "IMPORT"

    for refused in (world.staff, world.customer):
        got = await client.post(
            "/api/v1/imports",
            headers=await bearer(client, refused),
            data=form,
            files={"file": ("t.csv", CSV)},
        )
        assert got.status_code == 403 and got.json()["error"]["code"] == "FORBIDDEN"
    outsider = await client.post(
        "/api/v1/imports",
        headers=await bearer(client, world.outsider),
        data=form,
        files={"file": ("t.csv", CSV)},
    )
    assert outsider.status_code == 404
    no_file = await client.post("/api/v1/imports", headers=admin, data=form)
    assert no_file.status_code == 422 and no_file.json()["error"]["field"] == "file"


async def test_the_same_idempotency_key_answers_with_the_first_task(client, world):
    me = await bearer(client, world.staff) | {"Idempotency-Key": "nightly-2026-12-02"}
    first = await client.post("/api/v1/exports", headers=me, json={"team_id": world.team})
    await execute(client.rt, registry(), first.json()["task_id"], 1)
    again = await client.post("/api/v1/exports", headers=me, json={"team_id": world.team})
    assert again.status_code == 202 and again.json()["task_id"] == first.json()["task_id"]
    assert again.json()["status"] == "succeeded"
    other = await client.post(
        "/api/v1/exports", headers=me, json={"team_id": world.team, "q": "printer"}
    )
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"


async def test_a_cookie_write_needs_its_csrf_token_and_reads_do_not(client, world):
    resp = Response()
    csrf = await start_session(client.rt, resp, world.staff)
    cookie = {"Cookie": resp.headers["set-cookie"].split(";")[0]}
    body = {"team_id": world.team}
    refused = await client.post("/api/v1/exports", headers=cookie, json=body)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "CSRF"
    ok = await client.post("/api/v1/exports", headers=cookie | {"X-CSRF-Token": csrf}, json=body)
    assert ok.status_code == 202
    read = await client.get(f"/api/v1/tasks/{ok.json()['task_id']}", headers=cookie)
    assert read.status_code == 200 and read.json()["status"] == "queued"


async def test_bad_input_gets_a_typed_json_error(client, world):
    me = await bearer(client, world.staff)
    html = {"Accept": "text/html"}
    cases = [
        ("GET", "/api/v1/tasks/1", {}, None, 401, "UNAUTHENTICATED"),
        ("GET", "/api/v1/tasks/1", html, None, 401, "UNAUTHENTICATED"),
        ("POST", "/api/v1/exports", me, {"team_id": world.team, "status": "SOLVED"}, 422, None),
        ("POST", "/api/v1/exports", me, {"team_id": world.team, "colour": "red"}, 422, None),
        ("POST", "/api/v1/exports", me, {"team_id": world.team, "q": "a\x00b"}, 422, None),
        ("POST", "/api/v1/exports", me, {"team_id": "9" * 30}, 422, "VALIDATION"),
        ("POST", "/api/v1/exports", me, {"team_id": world.other_team}, 404, "NOT_FOUND"),
        ("DELETE", "/api/v1/tasks/1", me, None, 405, "HTTP"),
        ("POST", "/api/v1/exports", me, {}, 422, "VALIDATION"),
        ("GET", "/api/v1/tasks/abc", me, None, 404, "NOT_FOUND"),
        ("GET", f"/api/v1/tasks/{'9' * 30}", me, None, 404, "NOT_FOUND"),
        ("GET", "/api/v1/tasks?team_id=1&first=0", me, None, 422, "VALIDATION"),
        ("GET", "/api/v1/tasks?team_id=1&after=nope", me, None, 422, "VALIDATION"),
        ("GET", "/api/v1/nothing-here", me | html, None, 404, "NOT_FOUND"),
    ]
    for method, url, headers, body, status, code in cases:
        got = await client.request(method, url, headers=headers, json=body)
        assert got.status_code == status, (url, body, got.text)
        assert got.headers["content-type"].startswith("application/json"), (url, got.text)
        if code:
            assert got.json()["error"]["code"] == code, (url, got.text)
    bad = await client.post("/api/v1/exports", headers=me, content=b"{not json")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "body"
    named = await client.post("/api/v1/exports", headers=me, json={"team_id": "x"})
    assert named.json()["error"]["field"] == "team_id"


async def test_the_openapi_document_describes_the_api(client):
    doc = (await client.get("/openapi.json")).json()
    for path in ("/api/v1/exports", "/api/v1/imports", "/api/v1/tasks/{task_id}", "/api/v1/tasks"):
        assert path in doc["paths"], path
    assert (await client.get("/docs")).status_code == 200
