"""A rendered form is one request: its idempotency key makes a resent or double-clicked Export
(or reminder) the same task, even after that task finished; the answer carries a fresh key for
the next, deliberate click; and the buttons disable themselves while posting."""

from __future__ import annotations

import re

from desk.reads import tasks as reads
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry

KEY = re.compile(
    r'id="(export-key|reminder-key|import-key)" name="idempotency_key" value="([0-9a-f]{32})"'
)


def key_of(html: str, which: str = "export-key") -> str:
    found = {m.group(1): m.group(2) for m in KEY.finditer(html)}
    assert which in found, "the form carries no idempotency key"
    return found[which]


async def test_two_posts_with_one_key_after_the_first_finished_are_one_task(
    page_as, world, rt
) -> None:
    page = await page_as(world.staff)
    html = (await page.get("/tickets?status=OPEN")).text
    assert 'hx-disabled-elt="find button"' in html  # no second click while posting
    key = key_of(html)
    first = await page.hx_post("/exports", {"status": "OPEN", "idempotency_key": key})
    assert first.status_code == 202
    listed = (await reads.list_tasks(rt.pg, world.staff, world.team)).items[0]
    task = await tasks.get_task(rt, world.staff, listed.id)  # the ledger's row, with its round
    await execute(rt, registry(), task.id, task.run)
    again = await page.hx_post("/exports", {"status": "OPEN", "idempotency_key": key})
    assert again.status_code == 200
    assert f"Export #{task.id} was already started by this same request" in again.text
    assert [t.id for t in (await reads.list_tasks(rt.pg, world.staff, world.team)).items] == [
        task.id
    ]
    # The answer hands the form a new key: the next click is a new export.
    fresh = key_of(first.text)
    assert fresh != key and 'hx-swap-oob="true"' in first.text
    third = await page.hx_post("/exports", {"status": "OPEN", "idempotency_key": fresh})
    assert third.status_code == 202
    assert len((await reads.list_tasks(rt.pg, world.staff, world.team)).items) == 2


async def test_a_key_reused_with_other_filters_is_a_message_not_a_task(page_as, world, rt) -> None:
    page = await page_as(world.staff)
    key = key_of((await page.get("/tickets")).text)
    assert (await page.hx_post("/exports", {"idempotency_key": key})).status_code == 202
    r = await page.hx_post("/exports", {"q": "printer", "idempotency_key": key})
    assert r.status_code == 422 and "already used for a different request" in r.text
    assert len((await reads.list_tasks(rt.pg, world.staff, world.team)).items) == 1


async def test_the_reminder_form_is_one_request_too(page_as, world, rt, clock) -> None:
    ticket = world.tickets["login"]
    page = await page_as(world.staff)
    html = (await page.get(f"/tickets/{ticket}")).text
    assert 'hx-disabled-elt="find fieldset"' in html
    key = key_of(html, "reminder-key")
    form = {"preset": "1h", "idempotency_key": key}
    first = await page.hx_post(f"/tickets/{ticket}/reminder", form)
    assert first.status_code == 200 and "Reminder scheduled." in first.text
    clock.advance(120)  # "in 1 hour" is now another minute: the resent form is still one request
    again = await page.hx_post(f"/tickets/{ticket}/reminder", form)
    assert again.status_code == 200
    listed = await reads.list_tasks(rt.pg, world.staff, world.team, kind="REMINDER")
    assert len(listed.items) == 1 and listed.items[0].status == "WAITING"


async def test_the_import_form_resent_after_its_import_finished_is_one_import(
    page_as, world, rt
) -> None:
    page = await page_as(world.admin)
    key = key_of((await page.get("/imports")).text, "import-key")
    data = b"external_id,title\nE1,One\nE2,Two\n"

    async def send():
        return await page.hx_post(
            f"/imports?team_id={world.team}",
            data={"mode": "create", "idempotency_key": key},
            files={"file": ("t.csv", data, "text/csv")},
        )

    first = await send()
    assert first.status_code == 202
    shown = (await reads.list_tasks(rt.pg, world.admin, world.team, kind="IMPORT")).items[0]
    task = await tasks.get_task(rt, world.admin, shown.id)  # the ledger's row, with its round
    await execute(rt, registry(), task.id, task.run)
    again = await send()
    assert again.status_code == 200
    assert f"Import #{task.id} was already started by this same request" in again.text
    listed = await reads.list_tasks(rt.pg, world.admin, world.team, kind="IMPORT")
    assert [t.id for t in listed.items] == [task.id]
    assert key_of(first.text, "import-key") != key  # the next file is a new request
