"""The team's clocks page: an admin edits the SLA policy and the time rules (a field to fix is
shown beside it, what was typed kept, 422) and sees the latest rule runs with the tickets they
touched; staff, customers and people of no team get exactly what an unknown address answers;
every string of the page is in Chinese too."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from desk.helpdesk import sla_store
from desk.work import rule_runs
from tests.helpers import run_task
from ui import i18n

HTML = {"Accept": "text/html"}
SLA = {
    "zone": "Europe/Berlin",
    "hours_mon": "09:00-12:00, 13:00-17:00",
    "hours_fri": "09:00-15:00",
    "holidays": "2026-12-25\n2026-12-26",
    "min_first_response_URGENT": "60",
    "min_resolution_NORMAL": "2400",
    "warn_percent": "80",
}
RULES = {"close_resolved_after": "7", "remind_pending_after": "3", "resolve_pending_after": "4"}


async def test_admin_saves_the_policy_and_sees_it_back(page_as, world, rt) -> None:
    page = await page_as(world.admin)
    assert 'href="/clocks"' in (await page.get("/tickets")).text
    first = await page.get("/clocks")
    assert first.status_code == 200 and "No SLA policy yet" in first.text
    saved = await page.hx_post("/clocks/sla", SLA)
    assert saved.status_code == 200 and "SLA policy saved." in saved.text
    stored = await sla_store.get_team_policy(rt, world.admin, world.team)
    assert stored is not None and stored.calendar_doc["zone"] == "Europe/Berlin"
    assert stored.calendar_doc["hours"]["mon"] == ["09:00-12:00", "13:00-17:00"]
    assert stored.targets_doc == {"first_response": {"URGENT": 3600},
                                  "resolution": {"NORMAL": 144000}}  # fmt: skip
    assert stored.warn_share == pytest.approx(0.8)
    shown = (await page.get("/clocks")).text
    assert 'value="09:00-12:00, 13:00-17:00"' in shown and 'value="80"' in shown
    assert 'name="min_first_response_URGENT" inputmode="numeric" size="6"' in shown
    plain = await page.post("/clocks/sla", data=SLA | {"csrf_token": page.csrf}, headers=HTML)
    assert plain.status_code == 303 and plain.headers["location"] == "/clocks"
    cleared = await page.hx_post("/clocks/sla/clear", {})
    assert "SLA policy removed" in cleared.text
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"zone": "Mars/Olympus"}, "zone"),
        ({"hours_mon": "17:00-09:00"}, "hours"),
        ({"holidays": "25.12.2026"}, "holidays"),
        ({"min_first_response_URGENT": "soon"}, "first_response"),
        ({"min_first_response_URGENT": "9" * 5000}, "first_response"),
        ({"min_first_response_URGENT": "²"}, "first_response"),
        ({"warn_percent": "9" * 5000}, "warn_share"),
        ({"warn_percent": "150"}, "warn_share"),
    ],
)
async def test_a_bad_value_is_shown_beside_its_field(page_as, world, rt, over, field) -> None:
    page = await page_as(world.admin)
    r = await page.hx_post("/clocks/sla", SLA | over)
    assert r.status_code == 422
    assert f'id="err-{field}"' in r.text and 'aria-invalid="true"' in r.text
    typed = next(iter(over.values()))
    assert typed.split("\n")[0] in r.text  # what was typed is kept
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None


async def test_time_rules_save_and_runs_list_the_tickets_touched(page_as, world, rt) -> None:
    ticket = world.tickets["resolved"]
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE ticket SET status_since = :at WHERE id = :id"),
            {"at": rt.clock() - timedelta(days=8), "id": ticket},
        )
    page = await page_as(world.admin)
    saved = await page.hx_post("/clocks/rules", RULES)
    assert saved.status_code == 200 and "Time rules saved" in saved.text
    [run] = await rule_runs.list_runs(rt, world.admin, world.team)
    await run_task(rt, run.task_id)
    shown = (await page.get("/clocks")).text
    assert f'data-run-id="{run.task_id}"' in shown
    assert f'href="/tickets/{ticket}"' in shown and 'value="7"' in shown
    bad = await page.hx_post("/clocks/rules", RULES | {"close_resolved_after": "a week"})
    assert bad.status_code == 422 and 'id="err-close_resolved_after"' in bad.text
    refused = await page.hx_post("/clocks/rules", {"resolve_pending_after": "4"})
    assert refused.status_code == 422 and 'id="err-resolve_pending_after"' in refused.text
    assert (await rule_runs.read_rules(rt, world.admin, world.team)).rules.close_resolved_after == 7
    off = await page.hx_post("/clocks/rules", {})
    assert off.status_code == 200
    assert (
        await rule_runs.read_rules(rt, world.admin, world.team)
    ).rules.close_resolved_after is None


@pytest.mark.parametrize("who", ["staff", "customer"])
async def test_anyone_but_admins_gets_exactly_a_missing_page(page_as, world, rt, who) -> None:
    page = await page_as(getattr(world, who))
    assert 'href="/clocks"' not in (await page.get("/tickets")).text
    asks = [("GET", "/clocks", {}), ("POST", "/clocks/sla", SLA),
            ("POST", "/clocks/sla/clear", {}), ("POST", "/clocks/rules", RULES)]  # fmt: skip
    for method, url, data in asks:
        for hx in (False, True):
            answers = []
            for target in (url, "/no-such-page"):
                if method == "GET":
                    r = await (page.hx_get(target) if hx else page.get(target, headers=HTML))
                elif hx:
                    r = await page.hx_post(target, data)
                else:
                    r = await page.post(target, data=data | {"csrf_token": page.csrf}, headers=HTML)
                answers.append((r.status_code, r.text, r.headers.get("hx-retarget")))
            assert answers[0] == answers[1], (method, url, hx)
            assert answers[0][0] == 404
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None
    assert (await rule_runs.read_rules(rt, world.admin, world.team)).updated_at is None


async def test_an_admin_of_another_team_edits_only_their_own(page_as, world, rt) -> None:
    """The page is for the viewer's current team: another team's admin changes theirs alone."""
    page = await page_as(world.outsider)
    assert (await page.hx_post("/clocks/sla", SLA)).status_code == 200
    assert await sla_store.get_team_policy(rt, world.outsider, world.other_team) is not None
    assert await sla_store.get_team_policy(rt, world.admin, world.team) is None


async def test_the_page_is_fully_in_chinese(page_as, world, rt) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    zh = i18n.catalog("zh_Hans")
    zh.missing.clear()
    page = await page_as(world.admin)
    await page.hx_post("/clocks/sla", SLA)
    await page.hx_post("/clocks/rules", RULES)
    [run] = await rule_runs.list_runs(rt, world.admin, world.team)
    await run_task(rt, run.task_id)
    await page.hx_post("/clocks/rules", {"close_resolved_after": "x"})
    r = await page.get("/clocks")
    assert r.status_code == 200 and 'lang="zh-Hans"' in r.text
    await page.hx_post("/clocks/sla/clear", {})
    await page.get("/clocks")
    assert zh.missing == set()
