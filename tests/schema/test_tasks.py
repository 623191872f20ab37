"""Task fields through GraphQL as tasks move: labels with the injected clock, the download link
(its owner's alone, until it expires), buttons, reminders that fire or skip, and lists."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import pytest

from desk.ledger import lanes
from desk.work import reminders, tasks
from jobs import dispatcher
from schema.context import Context
from tests.helpers import run_task as _run
from tests.schema.run import run
from tests.schema.scene import make_scene
from web.auth import Caller

TASK = """query($id: ID!) { task(id: $id) {
  id kind status statusLabel progress progressMessage attempts maxAttempts lastError note
  runAt dispatchedAt createdAt startedAt finishedAt resultSummary expiresAt downloadUrl canCancel
  canRetry owner { id displayName } ticket { id title } team { id name }
} }"""
SENT = "query($id: ID!) { task(id: $id) { status dispatchedAt } }"


async def test_export_download_is_the_owners_until_it_expires(api, rt, world, clock) -> None:
    created = await tasks.create_export(rt, world.staff, world.team, {"status": ["OPEN"]})
    queued = (await api(TASK, {"id": created.id}, user=world.staff))["data"]["task"]
    assert queued["statusLabel"] == "Queued" and queued["downloadUrl"] is None
    assert queued["canCancel"] and not queued["canRetry"]
    assert queued["owner"] == {"id": str(world.staff), "displayName": "Staff"}

    await _run(rt, created.id)
    done = (await api(TASK, {"id": created.id}, user=world.staff))["data"]["task"]
    assert done["status"] == "COMPLETED" and done["statusLabel"] == "Completed"
    assert done["downloadUrl"] == f"/tasks/{created.id}/download"
    assert not done["canCancel"] and done["progress"] == 1.0

    r = await api.client.get(done["downloadUrl"], headers=api.headers(user=world.staff))
    assert r.status_code == 200
    rows = list(csv.reader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert len(rows) == 1 + 3  # header + the three OPEN tickets of the team

    # Not even the team's admin gets another member's export or its file.
    assert (await api(TASK, {"id": created.id}, user=world.admin))["data"]["task"] is None
    r = await api.client.get(done["downloadUrl"], headers=api.headers(user=world.admin))
    assert r.status_code == 404

    clock.advance(rt.settings.export_retention_hours * 3600 + 60)
    expired = (await api(TASK, {"id": created.id}, user=world.staff))["data"]["task"]
    assert expired["statusLabel"] == "Expired" and expired["downloadUrl"] is None


async def test_reminder_skips_when_the_ticket_is_resolved_first(api, rt, world, clock) -> None:
    ticket = world.tickets["login"]
    body = await api(
        'mutation($id: ID!) { scheduleReminder(ticketId: $id, inMinutes: 15, note: "call back") '
        "{ ... on Task { id statusLabel canCancel note ticket { id } } } }",
        {"id": ticket},
        user=world.staff,
    )
    task = body["data"]["scheduleReminder"]
    assert task["statusLabel"] == "Scheduled" and task["canCancel"] and task["note"] == "call back"
    assert task["ticket"] == {"id": str(ticket)}

    pending = "query($id: ID!) { ticket(id: $id) { pendingReminder { id } } }"
    assert (await api(pending, {"id": ticket}, user=world.admin))["data"]["ticket"][
        "pendingReminder"
    ] == {"id": task["id"]}
    # The customer sees their ticket, never its reminder.
    assert (await api(pending, {"id": ticket}, user=world.customer))["data"]["ticket"] == {
        "pendingReminder": None
    }

    resolve = "mutation($id: ID!) { updateTicket(id: $id, status: RESOLVED) { __typename } }"
    assert (await api(resolve, {"id": ticket}, user=world.staff))["data"]["updateTicket"] == {
        "__typename": "Ticket"
    }
    clock.advance(16 * 60)
    await _run(rt, int(task["id"]))
    fired = (await api(TASK, {"id": task["id"]}, user=world.staff))["data"]["task"]
    assert fired["status"] == "COMPLETED" and fired["statusLabel"] == "Skipped"
    assert "resolved" in fired["resultSummary"]
    assert (await api("{ unreadNotificationCount }", user=world.staff))["data"] == {
        "unreadNotificationCount": 0
    }


async def test_reminder_fires_into_notifications(api, rt, world, clock) -> None:
    task = await reminders.schedule_reminder(rt, world.admin, world.tickets["login"], in_minutes=5)
    clock.advance(6 * 60)
    await _run(rt, task.id)
    done = (await api(TASK, {"id": task.id}, user=world.admin))["data"]["task"]
    assert done["statusLabel"] == "Completed" and done["resultSummary"] == "Reminded the assignee."
    listing = await api(
        "{ unreadNotificationCount notifications(unreadOnly: true) { edges { node { id text link readAt } } } }",
        user=world.staff,  # the ticket's assignee
    )
    assert listing["data"]["unreadNotificationCount"] == 1
    (edge,) = listing["data"]["notifications"]["edges"]
    assert "Cannot log in" in edge["node"]["text"] and edge["node"]["readAt"] is None
    mark = "mutation($ids: [ID!]) { markNotificationsRead(ids: $ids) { ... on NotificationsMarked { count unreadCount } } }"
    marked = await api(mark, {"ids": [edge["node"]["id"], "999999", "junk"]}, user=world.staff)
    assert marked["data"]["markNotificationsRead"] == {"count": 1, "unreadCount": 0}
    # somebody else's notification ids mark nothing
    assert (await api(mark, {"ids": [edge["node"]["id"]]}, user=world.admin))["data"][
        "markNotificationsRead"
    ]["count"] == 0


async def test_dispatched_at_is_null_until_the_task_is_handed_to_the_queue(
    api, rt, world, clock
) -> None:
    await dispatcher.run_once(rt)  # Redis's epoch: the sweep below is an ordinary one
    await lanes.pause(rt, "long", None)
    held = await tasks.create_export(rt, world.staff, world.team, {})
    unsent = await api(SENT, {"id": held.id}, user=world.staff)
    assert unsent["data"]["task"] == {"status": "WAITING", "dispatchedAt": None}
    await lanes.resume(rt, "long")
    clock.advance(1)
    assert await dispatcher.run_once(rt) == 1
    sent = (await api(SENT, {"id": held.id}, user=world.staff))["data"]["task"]
    assert datetime.fromisoformat(sent["dispatchedAt"]) == clock()
    # Whoever may not see the task learns nothing of it, its sends included.
    for who in (world.admin, world.customer, world.outsider):
        assert await api(SENT, {"id": held.id}, user=who) == {"data": {"task": None}}


async def test_cancel_a_waiting_export(api, rt, world) -> None:
    created = await tasks.create_export(rt, world.customer, world.team, {})
    body = await api(
        "mutation($id: ID!) { cancelTask(id: $id) { ... on Task { status statusLabel canCancel } } }",
        {"id": created.id},
        user=world.customer,
    )
    assert body["data"]["cancelTask"] == {
        "status": "CANCELLED",
        "statusLabel": "Cancelled",
        "canCancel": False,
    }


@pytest.mark.parametrize("who", ["admin", "staff", "customer", "customer2", "outsider"])
async def test_hot_read_agrees_with_the_ordinary_read(api, rt, world, who) -> None:
    """task(id) over HTTP and run in-process (no web app around it) give the same answers;
    desk.reads.tasks against desk.work.tasks.get_task is tests/desk/reads/test_reads.py."""
    scene = await make_scene(rt, world)
    user = getattr(world, who)
    for task_id in (scene.staff_export, scene.customer_export, scene.failed_export, scene.reminder):
        fast = await api(TASK, {"id": task_id}, user=user)
        plain = await run(
            TASK,
            {"id": str(task_id)},
            Context(rt=rt, request=None, request_id="t", caller=Caller(user, "cookie")),
        )
        assert plain.errors is None
        assert fast["data"] == plain.data


async def test_tasks_list_is_newest_first_with_cursors(api, rt, world) -> None:
    ids = [(await tasks.create_export(rt, world.staff, world.team, {"q": q})).id for q in "abc"]
    page = "query($t: ID!, $after: String, $newer: ID) { tasks(teamId: $t, first: 2, after: $after, newerThan: $newer, kind: EXPORT) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }"
    first = (await api(page, {"t": world.team}, user=world.staff))["data"]["tasks"]
    assert [e["node"]["id"] for e in first["edges"]] == [str(ids[2]), str(ids[1])]
    assert first["pageInfo"]["hasNextPage"]
    after = first["pageInfo"]["endCursor"]
    second = (await api(page, {"t": world.team, "after": after}, user=world.staff))["data"]["tasks"]
    assert [e["node"]["id"] for e in second["edges"]] == [str(ids[0])]
    assert not second["pageInfo"]["hasNextPage"]
    newer = (await api(page, {"t": world.team, "newer": str(ids[1])}, user=world.staff))["data"]
    assert [e["node"]["id"] for e in newer["tasks"]["edges"]] == [str(ids[2])]


async def test_tickets_filter_and_pages(api, world) -> None:
    query = """query($t: ID!, $f: TicketFilterInput, $after: String) {
      tickets(teamId: $t, filter: $f, first: 1, after: $after) {
        totalCount pageInfo { hasNextPage endCursor }
        edges { cursor node { title status priority creator { id } assignee { id } team { name } } }
      } }"""
    urgent = await api(query, {"t": world.team, "f": {"priority": ["URGENT"]}}, user=world.staff)
    page = urgent["data"]["tickets"]
    assert page["totalCount"] == 1 and page["edges"][0]["node"]["title"] == "Printer on fire"
    mine = await api(query, {"t": world.team, "f": {"assignment": "ME"}}, user=world.staff)
    page = mine["data"]["tickets"]
    assert page["totalCount"] == 2 and page["pageInfo"]["hasNextPage"]
    rest = await api(
        query,
        {"t": world.team, "f": {"assignment": "ME"}, "after": page["pageInfo"]["endCursor"]},
        user=world.staff,
    )
    titles = {
        page["edges"][0]["node"]["title"],
        rest["data"]["tickets"]["edges"][0]["node"]["title"],
    }
    assert titles == {"Cannot log in", "Old issue"}
    search = await api(query, {"t": world.team, "f": {"q": "LOG IN"}}, user=world.customer)
    node = search["data"]["tickets"]["edges"][0]["node"]
    assert node["creator"] == {"id": str(world.customer)} and node["assignee"] == {
        "id": str(world.staff)
    }
    assert node["team"] == {"name": "Acme"}


async def test_me_and_team_members(api, world) -> None:
    me = await api(
        "{ me { email displayName memberships { role team { name myRole } } } }", user=world.staff
    )
    assert me["data"]["me"] == {
        "email": "chen@acme.test",
        "displayName": "Staff",
        "memberships": [{"role": "STAFF", "team": {"name": "Acme", "myRole": "STAFF"}}],
    }
    team = await api(
        "query($id: ID!) { team(id: $id) { members { role user { displayName } } } }",
        {"id": world.team},
        user=world.customer,
    )
    roles = {m["user"]["displayName"]: m["role"] for m in team["data"]["team"]["members"]}
    # A customer sees the staff and themselves, never the team's other customers.
    assert roles == {"Admin": "ADMIN", "Staff": "STAFF", "Customer": "CUSTOMER"}
