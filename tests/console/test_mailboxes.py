"""The console's mailboxes page and the /metrics lag gauges (desk/console/mailboxes.py): lag,
last error, errors grouped with numbers left out, the stale alert after MAILBOX_STALE_MINUTES;
an operator sees every team's mailboxes, a team admin their own, anyone else the unknown
address. All on the real database, time from the injected clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from desk.console import mailboxes as console_mailboxes
from desk.console import scrape as collector
from desk.core.runtime import Runtime
from desk.core.settings import ConfigError, load_settings
from desk.people.operators import Scope
from desk.work import dev_inbound
from tests.console.conftest import HTML
from tests.factories import World
from tests.mail.inbound_helpers import mailbox
from tests.telemetry.conftest import label_sets, parse, value
from ui import i18n

ZH = i18n.catalog("zh_Hans")


async def _set(rt: Runtime, box_id: int, *, ago: float | None, error: str | None = None) -> None:
    at = None if ago is None else rt.clock() - timedelta(seconds=ago)
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE mailbox SET last_fetch_at = :at, last_error = :e WHERE id = :id"),
            {"at": at, "e": error, "id": box_id},
        )


async def _scene(rt: Runtime, world: World) -> dict[str, int]:
    """Acme: one fresh, one stale and refusing; Globex: one stale with the same error kind."""
    fresh = await mailbox(rt, world.team, world.admin, username="fresh")
    stale = await mailbox(rt, world.team, world.admin, username="stale")
    globex = await mailbox(rt, world.other_team, world.outsider, username="globex")
    await _set(rt, fresh.id, ago=30)
    await _set(rt, stale.id, ago=3600, error="IMAP: login refused after 3 tries")
    await _set(rt, globex.id, ago=900, error="IMAP: login refused after 12 tries")
    return {"fresh": fresh.id, "stale": stale.id, "globex": globex.id}


def _operator(user_id: int) -> Scope:
    return Scope(user_id, "ops@site.test", True, ())


async def test_lag_errors_grouped_and_stale_after_the_setting(rt: Runtime, world: World) -> None:
    ids = await _scene(rt, world)
    await dev_inbound.send(
        rt, dev_inbound.draft({"team": str(world.team), "address": "a@b.test"})
    )  # the dev mailbox: switched off, no lag, never stale
    view = await console_mailboxes.in_scope(rt, _operator(world.admin))
    by_id = {r.id: r for r in view.rows}
    assert by_id[ids["fresh"]].lag_seconds == 30 and not by_id[ids["fresh"]].stale
    assert by_id[ids["stale"]].lag_seconds == 3600 and by_id[ids["stale"]].stale
    assert [r.id for r in view.stale] == [ids["stale"], ids["globex"]]  # most lagging first
    [dev] = [r for r in view.rows if r.is_dev]
    assert dev.lag_seconds is None and not dev.stale
    [group] = view.groups
    assert group.error == "IMAP: login refused after N tries"
    assert {r.id for r in group.mailboxes} == {ids["stale"], ids["globex"]}
    rt.settings = rt.settings.model_copy(update={"mailbox_stale_minutes": 60})
    view = await console_mailboxes.in_scope(rt, _operator(world.admin))
    assert [r.id for r in view.stale] == []  # 3600 s is not more than 60 minutes


async def test_a_mailbox_never_fetched_lags_from_its_creation(
    rt: Runtime, world: World, clock: Any
) -> None:
    box = await mailbox(rt, world.team, world.admin)
    clock.advance(11 * 60)
    view = await console_mailboxes.in_scope(rt, _operator(world.admin))
    [row] = view.rows
    assert row.id == box.id and row.last_fetch_at is None and row.stale
    assert row.lag_seconds == 11 * 60


async def test_operator_sees_every_team_and_the_alert(page_as, world, operator, rt) -> None:
    ids = await _scene(rt, world)
    page = await page_as(operator)
    r = await page.get("/ops/mailboxes", headers=HTML)
    assert r.status_code == 200
    for key in ("fresh", "stale", "globex"):
        assert f'data-mailbox-id="{ids[key]}"' in r.text
    assert 'data-testid="mailboxes-stale"' in r.text and "2 mailboxes have not" in r.text
    assert "IMAP: login refused after N tries" in r.text and "2 mailboxes" in r.text
    live = await page.hx_get("/ops/mailboxes?watch=1")
    assert live.status_code == 200 and "<nav" not in live.text and 'id="live"' in live.text


async def test_team_admin_sees_their_team_only(page_as, world, operator, rt) -> None:
    ids = await _scene(rt, world)
    admin = await page_as(world.admin)
    r = await admin.get("/ops/mailboxes", headers=HTML)
    assert r.status_code == 200 and f'data-mailbox-id="{ids["stale"]}"' in r.text
    assert f'data-mailbox-id="{ids["globex"]}"' not in r.text
    assert "1 mailbox has not" in r.text


async def test_staff_customers_and_the_signed_out_get_the_unknown_address(
    page_as, world, rt
) -> None:
    await _scene(rt, world)
    for who in (world.staff, world.customer, None):
        page = await page_as(who)
        r = await page.get("/ops/mailboxes", headers=HTML)
        unknown = await page.get("/ops-no-such-page", headers=HTML)
        assert r.status_code == 404
        assert r.text == unknown.text.replace("/ops-no-such-page", "/ops/mailboxes")


async def test_the_scrape_has_a_lag_per_enabled_mailbox_and_the_stale_count(
    rt: Runtime, world: World
) -> None:
    ids = await _scene(rt, world)
    await dev_inbound.send(rt, dev_inbound.draft({"team": str(world.team), "address": "a@b.test"}))
    types, samples = parse((await collector.scrape(rt)).decode())
    name = "taskdesk_mailbox_fetch_lag_seconds"
    assert types[name] == "gauge" and types["taskdesk_mailboxes_stale"] == "gauge"
    assert len(label_sets(samples, name)) == 3  # the dev mailbox is off: no series
    assert value(samples, name, team=str(world.team), mailbox=str(ids["stale"])) == 3600
    assert value(samples, name, team=str(world.other_team), mailbox=str(ids["globex"])) == 900
    assert value(samples, "taskdesk_mailboxes_stale") == 2


async def test_the_page_and_its_alert_render_fully_in_chinese(page_as, world, operator, rt) -> None:
    await _scene(rt, world)
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    ZH.missing.clear()
    page = await page_as(operator)
    r = await page.get("/ops/mailboxes", headers=HTML)
    assert r.status_code == 200 and 'lang="zh-Hans"' in r.text
    assert "2 个邮箱已超过 10 分钟未收取" in r.text
    assert ZH.missing == set()


@pytest.mark.parametrize("raw", ["0", "soon", "-5", "10081"])
def test_a_bad_mailbox_stale_minutes_stops_the_start_naming_it(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("MAILBOX_STALE_MINUTES", raw)
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "  MAILBOX_STALE_MINUTES: " in str(exc.value.code)


def test_mailbox_stale_minutes_defaults_to_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAILBOX_STALE_MINUTES", raising=False)
    assert load_settings().mailbox_stale_minutes == 10
    monkeypatch.setenv("MAILBOX_STALE_MINUTES", "30")
    assert load_settings().mailbox_stale_minutes == 30
