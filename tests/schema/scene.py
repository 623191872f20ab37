"""A small scene for GraphQL tests: the factories' world plus tasks, notifications and a token,
and helpers that reduce a GraphQL answer to a short outcome ("ok", "null", "NotFound", ...)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.helpdesk import notifications
from desk.imports import service as imports
from desk.people import users
from desk.work import onboarding, reminders, schedules, tasks
from tests.factories import World

PROBLEMS = {"NotFound", "NotAllowed", "ValidationProblem", "TaskConflict", "QuotaExceeded"}
ROLES = ("admin", "staff", "customer", "outsider", "anonymous")


@dataclass
class Scene:
    w: World
    staff_export: int
    customer_export: int
    failed_export: int  # the staff member's, FAILED
    reminder: int  # on the "login" ticket, by staff
    staff_token_id: int
    staff_token: str
    admin_upload: int  # an import file the admin uploaded (not started)
    ids: dict[str, Any] = field(default_factory=dict)
    staff_schedule: int = 0  # a weekly export schedule of the staff member's

    def user(self, role: str) -> int | None:
        return None if role == "anonymous" else getattr(self.w, role)


async def fail_task(rt: Runtime, task_id: int) -> None:
    """Put a task in FAILED (what the worker does after its last attempt)."""
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE background_task SET status = 'FAILED', attempts = max_attempts, "
                "last_error = 'boom', finished_at = :now WHERE id = :id"
            ),
            {"id": task_id, "now": rt.clock()},
        )


async def make_scene(rt: Runtime, w: World) -> Scene:
    staff_export = await tasks.create_export(rt, w.staff, w.team, {})
    customer_export = await tasks.create_export(rt, w.customer, w.team, {"q": "log"})
    failed = await tasks.create_export(rt, w.staff, w.team, {"status": ["CLOSED"]})
    await fail_task(rt, failed.id or 0)
    reminder = await reminders.schedule_reminder(rt, w.staff, w.tickets["login"], in_minutes=60)
    async with rt.engine.begin() as conn:
        for who, team in [
            (w.admin, w.team),
            (w.staff, w.team),
            (w.customer, w.team),
            (w.outsider, w.other_team),
        ]:
            await notifications.insert_many(
                conn, user_ids=[who], team_id=team, task_id=None, kind="TEST", text="hi", link="/"
            )
    token_row, token = await users.create_token(rt, w.staff, "matrix")
    upload = await imports.store_upload(rt, w.admin, w.team, "m.csv", b"external_id,title\nM-1,x\n")
    schedule = await schedules.create_schedule(rt, w.staff, w.team, {}, days=[1], time="08:00")
    invited = await onboarding.invite_member(rt, w.admin, w.team, "matrix@acme.test", "STAFF")
    return Scene(
        w=w,
        staff_export=staff_export.id or 0,
        customer_export=customer_export.id or 0,
        failed_export=failed.id or 0,
        reminder=reminder.id or 0,
        staff_token_id=token_row.id or 0,
        staff_token=token,
        admin_upload=upload.id or 0,
        staff_schedule=schedule.id,
        ids={"invitation": invited.invitation.id, "invitation_token": invited.token},
    )


def outcome(body: dict[str, Any], field: str) -> Any:
    """The error code (e.g. "UNAUTHENTICATED"), "null", a problem's typename, a connection's or
    list's length ("n=3"), an int as is, else the result's typename or "ok"."""
    errors = body.get("errors") or []
    if errors:
        return errors[0]["extensions"]["code"]
    value = body["data"][field]
    if value is None:
        return "null"
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list):
        return f"n={len(value)}"
    if isinstance(value, dict):
        if "edges" in value:
            return f"n={len(value['edges'])}"
        if "__typename" in value:
            return value["__typename"]
    return "ok"
