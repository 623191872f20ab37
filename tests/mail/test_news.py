"""News that reaches people: a finished export notifies its owner in-app (and by e-mail when
they asked for it), a fired reminder e-mails whoever asked for reminders by e-mail — each in the
transaction that finishes the task."""

from __future__ import annotations

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.people import preferences
from desk.work import reminders, tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.factories import World
from tests.smtp_server import SmtpServer


async def _emails(rt: Runtime) -> list[sa.Row[tuple[object, ...]]]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM background_task WHERE kind = 'EMAIL' ORDER BY id")
        return list((await conn.execute(q)).all())


async def _notes(rt: Runtime, user: int) -> list[sa.Row[tuple[object, ...]]]:
    async with rt.engine.connect() as conn:
        q = sa.text("SELECT * FROM notification WHERE user_id = :u ORDER BY id")
        return list((await conn.execute(q, {"u": user})).all())


async def _export(rt: Runtime, user: int, team: int, q: str) -> int:
    task = await tasks.create_export(rt, user, team, {"q": q})
    assert await execute(rt, registry(), task.id or 0, task.run) == "done"
    return task.id or 0


async def test_a_finished_export_notifies_its_owner_in_app_only_by_default(
    rt: Runtime, world: World
) -> None:
    task_id = await _export(rt, world.staff, world.team, "")
    [note] = await _notes(rt, world.staff)
    assert (note.kind, note.task_id, note.link) == (
        "EXPORT_READY",
        task_id,
        f"/tasks/{task_id}/download",
    )
    assert note.text_key == "export.ready" and note.text_params["rows"] == 4
    assert note.text.startswith(f"Export #{task_id} is ready: 4 rows, until ")
    assert await _emails(rt) == []
    assert await _notes(rt, world.admin) == []  # only the owner hears of it


async def test_an_owner_who_asked_gets_the_e_mail_too(
    mail_rt: Runtime, world: World, smtp: SmtpServer
) -> None:
    rt = mail_rt
    await preferences.set_mine(rt, world.customer, export_ready_email=True)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text(
                "UPDATE app_user SET locale = 'zh-CN', timezone = 'Asia/Shanghai' WHERE id = :u"
            ),
            {"u": world.customer},
        )
    task_id = await _export(rt, world.customer, world.team, "")
    [email] = await _emails(rt)
    assert (email.team_id, email.owner_id, email.status) == (world.team, world.customer, "WAITING")
    assert email.filters["to"] == "lin@acme.test" and email.filters["locale"] == "zh_Hans"
    assert email.filters["params"]["rows"] == 3  # a customer's export: their own tickets
    assert await execute(rt, registry(), email.id, email.run) == "done"
    [msg] = smtp.messages()
    assert msg["Subject"] == f"导出 #{task_id} 已完成"
    body = msg.get_body(("plain",))
    assert body is not None
    assert f"https://desk.acme.test/tasks/{task_id}/download" in body.get_content()  # type: ignore[attr-defined]
    assert "（Asia/Shanghai）" in body.get_content()  # type: ignore[attr-defined]  # noqa: RUF001


async def test_a_reminder_e_mails_only_those_who_asked(rt: Runtime, world: World, clock) -> None:
    await preferences.set_mine(rt, world.staff, reminder_email=True)
    await preferences.set_mine(rt, world.admin, export_ready_email=True)  # not reminders
    assigned = await reminders.schedule_reminder(
        rt, world.admin, world.tickets["login"], in_minutes=1
    )  # assigned to the staff member
    unassigned = await reminders.schedule_reminder(
        rt, world.admin, world.tickets["printer"], in_minutes=1
    )  # every staff member and admin of the team is reminded
    clock.advance(61)
    for task in (assigned, unassigned):
        assert await execute(rt, registry(), task.id or 0, task.run) == "done"
    emails = await _emails(rt)
    assert [(e.owner_id, e.filters["params"]["ticket_id"]) for e in emails] == [
        (world.staff, world.tickets["login"]),
        (world.staff, world.tickets["printer"]),
    ]
    assert emails[0].filters["template"] == "reminder"
    assert emails[0].filters["params"]["link"] == f"/tickets/{world.tickets['login']}"
    assert len(await _notes(rt, world.admin)) == 1  # in-app as before
