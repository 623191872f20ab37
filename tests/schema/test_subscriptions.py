"""GraphQL subscriptions (schema/subscriptions.py) over a real WebSocket to a real uvicorn: a task
followed to its end (by a real worker, and a reminder to its skip), each subscription's
visibility matrix (what may not be seen answers as missing, exactly as the queries answer), and
removal from a team ending delivery at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from desk.core.runtime import Runtime
from desk.core.settings import Settings
from desk.helpdesk import notifications, tickets
from desk.people import members, sessions, users
from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.helpers import running_workers
from tests.schema.subscribing import (
    DEADLINE,
    Served,
    Socket,
    codes,
    connected,
    listening,
    serve,
    socket,
)
from tests.sessions import cookie_header

TASK = "subscription($id: ID!) { taskUpdated(id: $id) { id status statusLabel resultSummary } }"
TEAM = "subscription($team: ID!) { teamTasks(teamId: $team) { id kind status } }"
NOTES = "subscription { notificationAdded { id text kind } }"
ROLES = ("admin", "staff", "customer", "customer2", "outsider")


async def _tokens(rt: Runtime, w: World) -> dict[str, str]:
    return {role: (await users.create_token(rt, getattr(w, role), role))[1] for role in ROLES}


async def _query(served: Served, token: str, query: str, variables: dict[str, Any]) -> Any:
    async with served.client() as client:
        r = await client.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert r.status_code == 200, r.text
    return r.json()["data"]


async def test_task_updated_sends_the_state_then_each_change_then_ends(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = (await users.create_token(rt, world.staff, "t"))[1]
    export = await tasks.create_export(rt, world.staff, world.team, {})
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        op = await s.subscribe(TASK, {"id": str(export.id)})
        first = (await s.next(op))["data"]["taskUpdated"]
        assert (first["id"], first["status"]) == (str(export.id), "WAITING")
        await tasks.cancel_task(rt, world.staff, export.id or 0)
        events = await s.until_complete(op)  # CANCELLED is an end: the stream completes
        assert [e["data"]["taskUpdated"]["status"] for e in events] == ["CANCELLED"]


@pytest.mark.slow  # a real worker process
async def test_an_export_is_followed_to_completed_by_a_real_worker(
    settings: Settings, rt: Runtime, world: World, tmp_path: Any
) -> None:
    token = (await users.create_token(rt, world.staff, "t"))[1]
    async with serve(settings) as served, socket(served, token=token) as s:
        with running_workers(settings, tmp_path):
            export = await tasks.create_export(rt, world.staff, world.team, {})
            op = await s.subscribe(TASK, {"id": str(export.id)})
            first = (await s.next(op))["data"]["taskUpdated"]
            events = [first] + [e["data"]["taskUpdated"] for e in await s.until_complete(op)]
    statuses = [e["status"] for e in events]
    order = ["WAITING", "RUNNING", "COMPLETED"]
    assert statuses == sorted(statuses, key=order.index), statuses  # never backwards
    assert statuses[-1] == "COMPLETED" and events[-1]["resultSummary"] == "4 rows exported."


async def test_a_reminder_is_followed_to_its_skip(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    token = (await users.create_token(rt, world.admin, "t"))[1]
    ticket = world.tickets["login"]
    reminder = await reminders.schedule_reminder(rt, world.staff, ticket, in_minutes=1)
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        op = await s.subscribe(TASK, {"id": str(reminder.id)})
        assert (await s.next(op))["data"]["taskUpdated"]["statusLabel"] == "Scheduled"
        await tickets.update_ticket(rt, world.staff, ticket, status="RESOLVED")
        assert await execute(rt, registry(), reminder.id or 0, reminder.run) == "done"
        last = (await s.until_complete(op))[-1]["data"]["taskUpdated"]
    assert (last["status"], last["statusLabel"]) == ("COMPLETED", "Skipped")
    assert "resolved" in last["resultSummary"]


async def test_a_label_that_turns_by_time_alone_is_pushed(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """Scheduled → Queued comes with no commit at all: the stream works out when the label
    turns (`rules.label_turns_at`) and sends it then, with the injected clock's time."""
    token = (await users.create_token(rt, world.admin, "t"))[1]
    reminder = await reminders.schedule_reminder(
        rt, world.staff, world.tickets["login"], in_minutes=1
    )
    clock.advance(54.8)  # the label turns 5 s before run_at: 0.2 s from now
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        op = await s.subscribe(TASK, {"id": str(reminder.id)})
        assert (await s.next(op))["data"]["taskUpdated"]["statusLabel"] == "Scheduled"
        clock.advance(1)
        async with asyncio.timeout(DEADLINE):  # keep-alives would keep `next` waiting for ever
            turned = (await s.next(op))["data"]["taskUpdated"]
    assert (turned["status"], turned["statusLabel"]) == ("WAITING", "Queued")


async def test_task_updated_answers_every_role_as_task_id_does(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    """Forbidden is missing: for each role and task, the first event is what `task(id)`
    answers (null, then the end, for a task not theirs and for one that does not exist)."""
    w = world
    staff_export = await tasks.create_export(rt, w.staff, w.team, {})
    customer_export = await tasks.create_export(rt, w.customer, w.team, {})
    reminder = await reminders.schedule_reminder(rt, w.staff, w.tickets["login"], in_minutes=60)
    ids = {
        "staff export": str(staff_export.id),
        "customer export": str(customer_export.id),
        "reminder": str(reminder.id),
        "missing": "999999",
        "not an id": "x1",
    }
    visible = {  # docs/architecture.md, "Visibility" (TASK_REACH)
        "admin": {"reminder"},  # exports are their owner's alone, even for an admin
        "staff": {"staff export", "reminder"},
        "customer": {"customer export"},  # customers never see reminders
        "customer2": set(),
        "outsider": set(),
    }
    tokens = await _tokens(rt, w)
    async with serve(settings, clock) as served:
        for role in ROLES:
            async with socket(served, token=tokens[role]) as s:
                for what, task_id in ids.items():
                    query = "query($id: ID!) { task(id: $id) { id } }"
                    answered = (await _query(served, tokens[role], query, {"id": task_id}))["task"]
                    op = await s.subscribe(
                        "subscription($id: ID!) { taskUpdated(id: $id) { id } }", {"id": task_id}
                    )
                    first = (await s.next(op))["data"]["taskUpdated"]
                    assert first == answered, (role, what)
                    assert (first is not None) == (what in visible[role]), (role, what)
                    if first is None:
                        assert await s.until_complete(op) == [], (role, what)


async def test_team_tasks_sends_only_what_each_role_may_see(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    w = world
    tokens = await _tokens(rt, w)
    async with serve(settings, clock) as served:
        sockets: dict[str, Socket] = {}
        ops: dict[str, str] = {}
        for role in ROLES:
            sockets[role] = await connected(served, tokens[role])
        try:
            # A non-member is answered as for a missing team: nothing, and the end.
            outsider = await sockets["outsider"].subscribe(TEAM, {"team": str(w.team)})
            assert await sockets["outsider"].until_complete(outsider) == []
            missing = await sockets["staff"].subscribe(TEAM, {"team": "999999"})
            assert await sockets["staff"].until_complete(missing) == []
            for role in ROLES[:-1]:
                ops[role] = await sockets[role].subscribe(TEAM, {"team": str(w.team)})
            await listening(served, len(ops))
            made = {
                "staff export": await tasks.create_export(rt, w.staff, w.team, {}),
                "customer export": await tasks.create_export(rt, w.customer, w.team, {}),
                "reminder": await reminders.schedule_reminder(
                    rt, w.staff, w.tickets["login"], in_minutes=60
                ),
            }
            names = {str(t.id): name for name, t in made.items()}
            expected = {
                "admin": {"reminder"},
                "staff": {"staff export", "reminder"},
                "customer": {"customer export"},
                "customer2": set(),
            }
            for role, want in expected.items():
                # Last, a task of the subscriber's own: everything before it has been sent.
                mine = await tasks.create_export(rt, getattr(w, role), w.team, {"q": "own"})
                got = await _until(sockets[role], ops[role], str(mine.id))
                assert {names[i] for i in got} == want, role
        finally:
            for s in sockets.values():
                await s.ws.close()


async def _until(s: Socket, op: str, last: str) -> list[str]:
    """The task ids `op` sends before task `last` (which it must send)."""
    seen: list[str] = []
    while (task := (await s.next(op))["data"]["teamTasks"])["id"] != last:
        if task["id"] not in seen:
            seen.append(task["id"])
    return seen


async def test_notification_added_sends_only_ones_own(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    w = world
    tokens = await _tokens(rt, w)
    async with serve(settings, clock) as served, socket(served, token=tokens["staff"]) as s:
        op = await s.subscribe(NOTES)
        await listening(served, 1)
        async with rt.engine.begin() as conn:  # nobody else's, then two of the subscriber's
            for user, text in [(w.admin, "admin's"), (w.staff, "first"), (w.staff, "second")]:
                await notifications.insert_many(
                    conn, user_ids=[user], team_id=w.team, task_id=None, kind="TEST", text=text,
                    link="/",
                )  # fmt: skip
        got = [(await s.next(op))["data"]["notificationAdded"]["text"] for _ in range(2)]
        assert got == ["first", "second"]
        await notifications.mark_read(rt, w.staff)  # a change, not a new notification
        async with rt.engine.begin() as conn:
            await notifications.insert_many(
                conn, user_ids=[w.staff], team_id=w.team, task_id=None, kind="TEST", text="third",
                link="/",
            )  # fmt: skip
        assert (await s.next(op))["data"]["notificationAdded"]["text"] == "third"


async def test_removal_from_the_team_ends_delivery_at_once(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    w = world
    token = (await users.create_token(rt, w.staff, "t"))[1]
    export = await tasks.create_export(rt, w.staff, w.team, {})
    async with serve(settings, clock) as served, socket(served, token=token) as s:
        follow = await s.subscribe(TASK, {"id": str(export.id)})
        assert (await s.next(follow))["data"]["taskUpdated"]["status"] == "WAITING"
        team = await s.subscribe(TEAM, {"team": str(w.team)})
        await listening(served, 2)
        await tasks.create_export(rt, w.staff, w.team, {"q": "before"})
        assert (await s.next(team))["data"]["teamTasks"]["kind"] == "EXPORT"
        await members.remove_member(rt, w.admin, w.team, w.staff)
        # The task reads as missing from now on: null, and the end; the team's stream ends.
        assert [e["data"]["taskUpdated"] for e in await s.until_complete(follow)] == [None]
        assert await s.until_complete(team) == []
        # Subscribing again answers as for a missing team and task.
        again = await s.subscribe(TEAM, {"team": str(w.team)})
        assert await s.until_complete(again) == []


async def test_a_session_that_ends_ends_its_streams(
    settings: Settings, rt: Runtime, world: World, clock: Any
) -> None:
    cookie = cookie_header(settings, world.customer)
    async with serve(settings, clock) as served, socket(served, cookie=cookie) as s:
        op = await s.subscribe(NOTES)
        await listening(served, 1)
        await sessions.revoke_all(rt, world.customer)
        payload = await s.next(op)
        assert codes(payload["errors"]) == ["UNAUTHENTICATED"] and payload["data"] is None
        assert await s.until_complete(op) == []
