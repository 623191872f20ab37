"""Every page and fragment answers another team's ids exactly as a missing id (404), customers
see only their own tickets and never a reminder, and bad input is a clear 4xx — never a 500."""

from __future__ import annotations

import pytest

from desk.reads import tasks as reads
from desk.work import reminders, schedules, tasks

MISSING = 99_999


@pytest.fixture
async def acme(rt, world):
    """Acme's ids an outsider must not reach: a ticket, a staff export, a reminder."""
    export = await tasks.create_export(rt, world.staff, world.team, {})
    reminder = await reminders.schedule_reminder(
        rt, world.staff, world.tickets["login"], in_minutes=30
    )
    schedule = await schedules.create_schedule(
        rt, world.staff, world.team, {}, days=[1], time="08:00"
    )
    return {
        "ticket": world.tickets["login"],
        "export": export.id,
        "reminder": reminder.id,
        "schedule": schedule.id,
    }


GETS = [
    "/tickets/{ticket}",
    "/tasks/{export}",
    "/tasks/{reminder}",
    "/tasks/{export}/download",
]
POSTS = [
    ("/tickets/{ticket}", {"status": "CLOSED"}),
    ("/tickets/{ticket}/reminder", {"preset": "1h"}),
    ("/tickets/{ticket}/reminder/cancel", {}),
    ("/tasks/{export}/cancel", {}),
    ("/tasks/{export}/retry", {}),
    ("/tasks/{reminder}/cancel", {}),
    ("/schedules/{schedule}/pause", {}),
    ("/schedules/{schedule}/resume", {}),
    ("/schedules/{schedule}/delete", {}),
]


async def _same_as_missing(page, method, url, data=None):
    """The answer for a foreign id and for an id that does not exist are the same."""
    answers = []
    for target in (url, url.replace(url.split("/")[2], str(MISSING), 1)):
        for hx in (False, True):
            if method == "GET":
                r = await (page.hx_get(target) if hx else page.get(target))
            else:
                r = await (
                    page.hx_post(target, data)
                    if hx
                    else page.post(target, data={**(data or {}), "csrf_token": page.csrf})
                )
            answers.append((r.status_code, r.text.replace(str(MISSING), "ID")))
    assert all(a[0] == 404 for a in answers), (url, [a[0] for a in answers])
    assert answers[0][1] == answers[2][1].replace(str(MISSING), "ID")
    assert "Acme" not in answers[0][1] and "Cannot log in" not in answers[0][1]


@pytest.mark.parametrize("path", GETS)
async def test_outsider_gets_not_found_for_pages_and_fragments(page_as, world, acme, path) -> None:
    await _same_as_missing(await page_as(world.outsider), "GET", path.format(**acme))


@pytest.mark.parametrize("path, data", POSTS)
async def test_outsider_gets_not_found_for_actions(page_as, world, acme, rt, path, data) -> None:
    await _same_as_missing(await page_as(world.outsider), "POST", path.format(**acme), data)
    assert (await tasks.get_task(rt, world.staff, acme["export"])).status == "WAITING"


async def test_staff_cannot_reach_the_other_team(page_as, world) -> None:
    page = await page_as(world.staff)
    assert (await page.get(f"/tickets/{world.tickets['globex']}")).status_code == 404
    assert (await page.hx_get(f"/tickets/{world.tickets['globex']}")).status_code == 404


async def test_exports_are_their_owners_alone(page_as, world, acme) -> None:
    admin = await page_as(world.admin)
    assert (await admin.hx_get(f"/tasks/{acme['export']}")).status_code == 404
    assert (await admin.hx_get(f"/tasks/{acme['reminder']}")).status_code == 200
    r = await admin.get("/tasks")
    assert f'id="task-{acme["reminder"]}"' in r.text and f'id="task-{acme["export"]}"' not in r.text


async def test_htmx_errors_go_to_the_alert_area(page_as, world, acme) -> None:
    r = await (await page_as(world.outsider)).hx_get(f"/tasks/{acme['export']}")
    assert r.status_code == 404
    assert r.headers["HX-Retarget"] == "#flash" and r.headers["HX-Reswap"] == "innerHTML"
    assert "<html" not in r.text and "Task not found." in r.text


async def test_customer_sees_own_tickets_and_no_reminders(page_as, world, acme, rt) -> None:
    lin = await page_as(world.customer)
    r = await lin.get("/tickets")
    assert r.status_code == 200 and "My tickets" in r.text
    assert "Cannot log in" in r.text and "Printer on fire" not in r.text  # Wang's
    assert "Assigned to" not in r.text
    r = await lin.get(f"/tickets/{world.tickets['login']}")
    assert r.status_code == 200
    assert (
        'id="reminders"' not in r.text and "Remind" not in r.text and "Save changes" not in r.text
    )
    assert (await lin.get(f"/tickets/{world.tickets['printer']}")).status_code == 404
    assert (await lin.hx_get(f"/tasks/{acme['reminder']}")).status_code == 404
    r = await lin.get("/tasks")
    assert f"task-{acme['reminder']}" not in r.text and "Reminder" not in r.text
    # Acting on reminders: their own ticket → not allowed; someone else's → not found.
    r = await lin.hx_post(f"/tickets/{world.tickets['login']}/reminder", {"preset": "1h"})
    assert r.status_code == 403
    r = await lin.hx_post(f"/tickets/{world.tickets['printer']}/reminder", {"preset": "1h"})
    assert r.status_code == 404
    r = await lin.hx_post(f"/tickets/{world.tickets['login']}", {"status": "CLOSED"})
    assert r.status_code == 403 and "Only staff" in r.text


async def test_customer_exports_only_their_tickets(page_as, world, rt) -> None:
    from jobs.execution import execute
    from jobs.processors import registry

    lin = await page_as(world.customer)
    r = await lin.hx_post("/exports", {})
    assert r.status_code == 202 and "queued" in r.text
    listed = (await reads.list_tasks(rt.pg, world.customer, world.team)).items[0]
    task = await tasks.get_task(rt, world.customer, listed.id)  # the ledger's row, its scope
    assert task.scope_creator_id == world.customer
    assert await execute(rt, registry(), task.id, task.run) == "done"
    assert task.id and "3 rows exported." in (await lin.hx_get(f"/tasks/{task.id}")).text


@pytest.mark.parametrize(
    "url, status",
    [
        ("/tickets/abc", 404),
        ("/tasks/1e3", 404),
        ("/tickets?status=BOGUS", 422),
        ("/tickets?after=garbage", 422),
        ("/tickets?assignment=user", 422),
        ("/tickets?q=" + "x" * 300, 422),
        ("/tickets?start=-1", 400),
        ("/tasks?limit=0", 400),
        ("/tasks?after=zz", 422),
        ("/notifications?after=x", 422),
    ],
)
async def test_bad_input_is_a_clear_4xx(page_as, world, url, status) -> None:
    r = await (await page_as(world.staff)).get(url)
    assert r.status_code == status, r.text
    assert "<h1>" in r.text and 'class="msg error"' in r.text


async def test_bad_form_input_is_shown_in_place(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.hx_post("/tickets", {"title": "   "})
    assert r.status_code == 422 and "cannot be empty" in r.text and 'id="ticket-form"' in r.text
    r = await page.hx_post(f"/tickets/{world.tickets['login']}", {"priority": "SOON"})
    assert r.status_code == 422 and 'id="ticket-fields"' in r.text and "use one of" in r.text
    r = await page.hx_post(
        f"/tickets/{world.tickets['login']}", {"assignee_id": str(world.customer)}
    )
    assert r.status_code == 422 and "staff member or admin" in r.text
    r = await page.hx_post("/exports", {"status": "NOPE"})
    assert r.status_code == 422 and "unknown value" in r.text


async def test_unknown_address_is_the_404_page_for_browsers(page_as, world) -> None:
    page = await page_as(world.staff)
    r = await page.get("/no/such/page", headers={"Accept": "text/html"})
    assert r.status_code == 404 and "<h1>Not found</h1>" in r.text
    r = await page.get("/no/such/page", headers={"Accept": "application/json"})
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}


async def test_outsider_cannot_withdraw_another_teams_invitation(page_as, world, rt) -> None:
    """Olga administers Globex: Acme's invitation answers her exactly as a missing one."""
    from desk.people import invitations
    from desk.work import onboarding

    new = await onboarding.invite_member(rt, world.admin, world.team, "v@acme.test", "STAFF")
    olga = await page_as(world.outsider)
    answers = []
    for target in (new.invitation.id, MISSING):
        for hx in (False, True):
            url = f"/members/invitations/{target}/revoke"
            r = await (olga.hx_post(url) if hx else olga.post(url, data={"csrf_token": olga.csrf}))
            answers.append((r.status_code, r.text))
    assert all(a[0] == 404 for a in answers)
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert [p.id for p in await invitations.list_pending(rt, world.admin, world.team)] == [
        new.invitation.id
    ]


@pytest.mark.parametrize(
    "url", ["/invitations/", "/invitations/x", "/password/reset/x", "/password/reset/%C3%A9" * 3]
)
async def test_link_pages_with_odd_tokens_are_404_pages(page_as, world, url) -> None:
    for who in (None, world.staff):
        r = await (await page_as(who)).get(url, headers={"Accept": "text/html"})
        assert r.status_code == 404 and "<h1>" in r.text
