"""GraphQL: `Idempotency-Key` (header or `idempotencyKey`) makes a retried createExport the same
task, even finished; and server-written text keeps its English `message` beside a stable key."""

from __future__ import annotations

from datetime import timedelta

from desk.core import messages
from desk.helpdesk import notifications
from desk.work import reminders
from jobs.execution import execute
from jobs.processors import registry

EXPORT = """mutation($team: ID!, $key: String) {
  createExport(teamId: $team, idempotencyKey: $key) {
    __typename
    ... on Task { id status resultSummary resultSummaryKey resultSummaryParams }
    ... on ValidationProblem { field message }
    ... on QuotaExceeded { message messageKey messageParams }
  }
}"""


async def _export(api, world, *, key=None, header=None, q=None):
    query = (
        EXPORT
        if q is None
        else EXPORT.replace("idempotencyKey: $key", f'idempotencyKey: $key, filter: {{q: "{q}"}}')
    )
    headers = api.headers(user=world.staff)
    if header:
        headers["Idempotency-Key"] = header
    body = {"query": query, "variables": {"team": str(world.team), "key": key}}
    r = await api.client.post("/graphql", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["data"]["createExport"]


async def test_header_key_returns_the_finished_task_and_its_keyed_summary(api, rt, world) -> None:
    first = await _export(api, world, header="retry-key-0001")
    assert first["__typename"] == "Task"
    await execute(rt, registry(), int(first["id"]), 1)
    again = await _export(api, world, header="retry-key-0001")
    assert again["id"] == first["id"] and again["status"] == "COMPLETED"
    assert again["resultSummary"] == "4 rows exported."
    assert again["resultSummaryKey"] == "export.done"
    assert again["resultSummaryParams"] == {"rows": 4}


async def test_argument_key_and_reuse_with_other_filters(api, world) -> None:
    first = await _export(api, world, key="arg-key-0001")
    assert (await _export(api, world, key="arg-key-0001"))["id"] == first["id"]
    reused = await _export(api, world, key="arg-key-0001", q="other")
    assert reused["__typename"] == "ValidationProblem"
    assert reused["field"] == "idempotencyKey" and "different request" in reused["message"]
    both = await _export(api, world, key="arg-key-0002", header="arg-key-0003")
    assert both["__typename"] == "ValidationProblem" and both["field"] == "idempotencyKey"


async def test_quota_message_has_a_key(api, world) -> None:
    for i in range(3):
        assert (await _export(api, world, q=f"n{i}"))["__typename"] == "Task"
    refused = await _export(api, world, q="n4")
    assert refused["__typename"] == "QuotaExceeded"
    assert refused["message"] == "You already have 3 exports running; wait for one to finish."
    assert refused["messageKey"] == "quota.active_exports"
    assert refused["messageParams"] == {"active": 3}


async def test_notification_and_skip_reason_keep_english_plus_key(api, rt, world, clock) -> None:
    ticket = world.tickets["login"]
    first = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=5)
    await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=10)
    query = (
        "query($id: ID!) { task(id: $id) { resultSummary resultSummaryKey resultSummaryParams } }"
    )
    skipped = (await api(query, {"id": str(first.id)}, user=world.staff))["data"]["task"]
    due = clock() + timedelta(minutes=10)
    assert skipped["resultSummary"] == f"Superseded by a reminder for {due:%Y-%m-%d %H:%M} UTC."
    assert skipped["resultSummaryKey"] == "reminder.superseded"
    assert skipped["resultSummaryParams"]["due_at"].startswith(f"{due:%Y-%m-%dT%H:%M}")
    async with rt.engine.begin() as conn:
        said = messages.message("reminder.notification", ticket=ticket, title="T", status="OPEN")
        await notifications.insert_many(
            conn, user_ids=[world.staff], team_id=world.team, task_id=None, kind="REMINDER",
            text=said, link="",
        )  # fmt: skip
    got = await api("{ notifications { nodes { text textKey textParams } } }", user=world.staff)
    node = got["data"]["notifications"]["nodes"][0]
    assert node["text"] == f"Reminder: ticket #{ticket} “T” is still open."
    assert node["textKey"] == "reminder.notification"
    assert node["textParams"] == {"ticket": ticket, "title": "T", "status": "OPEN"}


async def test_status_label_says_worker_lost_when_the_lease_ran_out(api, rt, world, clock) -> None:
    import sqlalchemy as sa

    first = await _export(api, world)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'RUNNING', attempts = 1, lease_until = :t "
                "WHERE id = :id"
            ),
            {"t": clock() - timedelta(seconds=1), "id": int(first["id"])},
        )
    query = "query($id: ID!) { task(id: $id) { status statusLabel } }"
    got = (await api(query, {"id": first["id"]}, user=world.staff))["data"]["task"]
    assert got == {"status": "RUNNING", "statusLabel": "Worker lost"}
