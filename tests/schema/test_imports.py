"""startImport: upload over HTTP, start over GraphQL; admins only; one import per team."""

from __future__ import annotations

from desk.imports import service as imports
from desk.people import users
from tests.helpers import run_task as _run

START = """mutation($team: ID!, $upload: ID!, $mode: ImportMode!) {
  startImport(teamId: $team, uploadId: $upload, mode: $mode) {
    __typename
    ... on Task { id kind status statusLabel progressMessage resultSummary }
    ... on TaskConflict { existingTask { id } }
    ... on NotFound { message }
    ... on NotAllowed { message }
  }
}"""
CSV = b"external_id,title,status\nG-1,From GraphQL,OPEN\nG-2,,OPEN\n"


async def _upload(api, rt, world, user) -> int:
    _, token = await users.create_token(rt, user, "upload")  # bearer: no CSRF token needed
    r = await api.client.post(
        f"/teams/{world.team}/imports/uploads",
        headers=api.headers(token=token),
        files={"file": ("t.csv", CSV)},
    )
    assert r.status_code == 201, r.text
    return r.json()["uploadId"]


async def test_admin_starts_an_import_and_a_second_attaches(api, rt, world) -> None:
    upload = await _upload(api, rt, world, world.admin)
    variables = {"team": world.team, "upload": upload, "mode": "CREATE"}
    first = (await api(START, variables, user=world.admin))["data"]["startImport"]
    assert (
        first["__typename"] == "Task"
        and first["kind"] == "IMPORT"
        and first["statusLabel"] == "Queued"
    )
    again = (await api(START, variables, user=world.admin))["data"]["startImport"]
    assert again == {"__typename": "TaskConflict", "existingTask": {"id": first["id"]}}
    await _run(rt, int(first["id"]))
    done = await api(
        "query($id: ID!) { task(id: $id) { status resultSummary } }",
        {"id": first["id"]},
        user=world.admin,
    )
    assert done["data"]["task"] == {
        "status": "COMPLETED",
        "resultSummary": "1 created, 0 updated, 0 unchanged, 1 rejected.",
    }


async def test_who_may_start_an_import(api, rt, world) -> None:
    upload = (await imports.store_upload(rt, world.admin, world.team, "t.csv", CSV)).id
    variables = {"team": world.team, "upload": upload, "mode": "UPSERT"}
    staff = (await api(START, variables, user=world.staff))["data"]["startImport"]
    assert staff["__typename"] == "NotAllowed"
    for outsider in (world.outsider,):
        got = (await api(START, variables, user=outsider))["data"]["startImport"]
        assert got["__typename"] == "NotFound"
    missing = (await api(START, {**variables, "upload": 999999}, user=world.admin))["data"][
        "startImport"
    ]
    assert missing["__typename"] == "NotFound"
    anonymous = await api(START, variables)
    assert anonymous["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
