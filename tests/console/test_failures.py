"""Failure groups (desk.console.failures) read well in either language (issue 24): a number is
one N however it is written, and an error the desk words itself (an export over the row limit)
is titled, sampled and shown on its task in the reader's language."""

from __future__ import annotations

import sqlalchemy as sa

from desk.console import failures
from desk.people import operators
from desk.work import tasks
from tests.console.conftest import HTML, fail
from tests.factories import bulk_tickets
from tests.helpers import export_over_the_limit

TITLE = "N rows is more than the limit of N; narrow the filters."
TITLE_ZH = "N 行超过了 N 行的上限；请缩小筛选范围。"  # noqa: RUF001
REASON_ZH = "1,204 行超过了 1,000 行的上限；请缩小筛选范围。"  # noqa: RUF001


async def _over_the_limit(rt, world) -> tuple[int, int]:
    """A keyed failure, and one written as English alone (before keys, by an older worker)."""
    await bulk_tickets(rt, world.team, world.customer, 1_200)
    keyed = await export_over_the_limit(rt, world.staff, world.team, 1_000)
    legacy = await tasks.create_export(rt, world.admin, world.team, {"q": "Bulk"})
    await fail(
        rt,
        legacy.id or 0,
        "2,500,000 rows is more than the limit of 2,000,000; narrow the filters.",
    )
    return keyed, legacy.id or 0


async def test_numbers_with_separators_group_as_one_readable_title(rt, world, operator) -> None:
    _keyed, legacy = await _over_the_limit(rt, world)
    groups = await failures.groups(rt, await operators.scope_of(rt, operator))
    [group] = [g for g in groups if "limit" in g.error]
    assert group.error == TITLE
    assert group.failed == 2 and group.sample_id == legacy
    await fail(rt, legacy, "Ticket 1.5 is locked by 'x'")  # a decimal is one N too
    titles = {g.error for g in await failures.groups(rt, await operators.scope_of(rt, operator))}
    assert "Ticket N is locked by …" in titles and TITLE in titles


async def test_the_group_its_sample_and_the_task_speak_the_readers_language(
    page_as, rt, world, operator
) -> None:
    keyed, legacy = await _over_the_limit(rt, world)
    await fail(rt, legacy, "Disk full")  # the keyed failure alone in its group
    page = await page_as(operator)
    english = (await page.get("/ops/failures", headers=HTML)).text
    assert f'data-testid="group-title">{TITLE}<' in english
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    listing = (await page.get("/ops/failures", headers=HTML)).text
    assert f'data-testid="group-title">{TITLE_ZH}<' in listing
    assert REASON_ZH in listing and "rows is more than" not in listing
    for url in (f"/ops/tasks/{keyed}", "/ops/tasks?status=FAILED"):
        shown = (await page.get(url, headers=HTML)).text
        assert REASON_ZH in shown and "rows is more than" not in shown, url
