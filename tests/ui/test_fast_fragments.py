"""The polled fragments' short way (ui.fast) answers exactly as the router does, steps aside
for anything unusual, and the row render cache (ui.rowcache) never shows one viewer's or one
moment's row to another."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from ui import fast, rowcache
from ui.fast import Declined


@pytest.fixture
def router_only(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Send every request the ordinary way (the router), as before the short way existed."""

    def use() -> None:
        monkeypatch.setattr(fast, "_candidate", lambda scope: False)

    return use


async def _answers(page: Any, urls: list[str]) -> list[tuple[int, str, dict[str, str]]]:
    out = []
    for url in urls:
        r = await page.hx_get(url)
        out.append((r.status_code, r.text, dict(r.headers)))
    return out


async def test_the_short_way_answers_as_the_router(page_as, world, rt, router_only) -> None:
    mine = await tasks.create_export(rt, world.staff, world.team, {"q": "mine"})
    theirs = await tasks.create_export(rt, world.customer, world.team, {"q": "theirs"})
    done = await tasks.create_export(rt, world.staff, world.team, {"q": "done"})
    assert await execute(rt, registry(), done.id, done.run) == "done"
    page = await page_as(world.staff)
    now = int(rt.clock().timestamp())
    row = (await page.hx_get(f"/tasks/{mine.id}?since={now}")).text
    version = row.split('data-v="')[1].split('"')[0]
    urls = [
        f"/tasks/{mine.id}",
        f"/tasks/{mine.id}?since={now - 2}.5",
        f"/tasks/{done.id}",  # finished: the task-finished trigger
        f"/tasks/{theirs.id}",  # not the staff member's to see: 404
        "/tasks/99999",
        f"/tasks/0{mine.id}",  # unusual: the router's reading
        f"/tasks/{mine.id}?since=abc",  # 400
        f"/watch?r={mine.id}:{now}:{version}:1&bell=-1&h=x&list=tasks&newest=0&limit=8",
        f"/watch?r={mine.id}:{now - 3}:{version}:1",
        f"/watch?r={mine.id}:{now}:old:0&r={theirs.id}:{now}:v:1",
        "/watch?bell=-5",  # 400
        "/watch?list=admin",
        "/watch?limit=99",
    ]
    short = await _answers(page, urls)
    router_only()
    assert short == await _answers(page, urls)


async def test_the_short_way_is_logged_under_the_route(
    page_as, world, rt, caplog, monkeypatch
) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    taken: list[str] = []
    respond = fast.FastFragments._respond

    async def spy(self: Any, scope: Any, receive: Any) -> Any:
        answer = await respond(self, scope, receive)
        taken.append(scope["path"])
        return answer

    monkeypatch.setattr(fast.FastFragments, "_respond", spy)
    with caplog.at_level(logging.INFO, logger="taskdesk.http"):
        assert (await page.hx_get(f"/tasks/{task.id}")).status_code == 200
        assert (await page.hx_get("/watch?bell=-1")).status_code in (200, 204)
    routes = [getattr(r, "route", None) for r in caplog.records if r.name == "taskdesk.http"]
    assert routes == ["/tasks/{task_id}", "/watch"]
    assert taken == [f"/tasks/{task.id}", "/watch"]  # both answered the short way


async def test_signed_out_polls_go_to_sign_in(page_as, world, rt) -> None:
    task = await tasks.create_export(rt, world.staff, world.team, {})
    anonymous = await page_as(None)
    for url in (f"/tasks/{task.id}", "/watch?bell=-1"):
        r = await anonymous.hx_get(url)
        assert r.headers.get("HX-Redirect", "").startswith("/login?next="), url


@pytest.mark.parametrize(
    "query",
    [b"since=", b"since=-1", b"since=1e3", b"since=nan"],
)
def test_row_parameters_outside_the_plain_case_go_the_ordinary_way(query: bytes) -> None:
    with pytest.raises(Declined):
        fast.row_params({"query_string": query})


def test_watch_parameters_as_the_route_reads_them() -> None:
    got = fast.watch_params({"query_string": b"r=1:2:v:1&r=2:2:v:0&bell=-1&h=1-2&newest=7"})
    assert got == {
        "r": ["1:2:v:1", "2:2:v:0"],
        "bell": -1,
        "health_v": "1-2",
        "list_name": None,
        "newest": 7,
        "limit": 8,
    }
    for odd in (b"bell=+1", b"newest=01", b"limit=0", b"limit=51", b"h=" + b"x" * 17):
        with pytest.raises(Declined):
            fast.watch_params({"query_string": odd})
    with pytest.raises(Declined):
        fast.watch_params({"query_string": b"&".join([b"r=1:2:v:1"] * 61)})


async def test_cached_rows_differ_by_rights_and_by_what_they_show(page_as, world, rt) -> None:
    rowcache.clear()
    task = await tasks.create_export(rt, world.staff, world.team, {"q": "cache"})
    page = await page_as(world.staff)
    now = int(rt.clock().timestamp())
    first = (await page.hx_get(f"/tasks/{task.id}?since={now}")).text
    later = (await page.hx_get(f"/tasks/{task.id}?since={now - 1}")).text  # cached, its own since
    assert 'data-delay="1"' in first and 'data-delay="1"' in later
    assert first.replace(f'data-since="{now}.000"', f'data-since="{now - 1}.000"') == later
    # The same task, the same moment, but a row the watcher may not cancel from here.
    r = await page.hx_get(f"/watch?r={task.id}:{now}:stale:0")
    assert f'hx-post="/tasks/{task.id}/cancel"' not in r.text
    assert f'hx-post="/tasks/{task.id}/cancel"' in first
    # Something shown changes without `updated_at` moving (a fake clock standing still).
    await rt.pg.write(
        "UPDATE background_task SET progress_total = 1234 WHERE id = %(id)s", {"id": task.id}
    )
    await rt.pg.write(
        "UPDATE background_task SET status = 'RUNNING', progress = 0.5 WHERE id = %(id)s",
        {"id": task.id},
    )
    moved = (await page.hx_get(f"/tasks/{task.id}?since={now}")).text
    assert "1,234" in moved and moved != first


async def test_an_unfinished_row_skips_the_block_with_the_same_bytes(page_as, world, rt) -> None:
    from ui import render, task_lists

    task = await tasks.create_export(rt, world.staff, world.team, {"q": "block"})
    page = await page_as(world.staff)
    r = await page.hx_get(f"/tasks/{task.id}")
    row = await task_lists.row(rt, world.staff, task.id, None)
    v = type("V", (), {"tz": render.ZoneInfo("UTC"), "locale": "en"})()
    block = render.render_html("en", "tasks.html", {"v": v, "row": row}, "row")
    assert row.active and r.text == block.replace(
        block.split('data-since="')[1].split('"')[0], r.text.split('data-since="')[1].split('"')[0]
    )


async def test_both_ways_read_one_parameter_spec(page_as, world, rt, router_only) -> None:
    """Every bound of the spec (ui.watch.PARAMS, ui.tasks_routes.ROW_PARAMS): the value on it is
    taken by the short way and by the route, the one past it declined by one, refused by the other."""
    from ui import params, tasks_routes, watch

    task = await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    cases: list[tuple[str, str, bool]] = []  # (path, query, within)
    for path, specs in (("/watch", watch.PARAMS), (f"/tasks/{task.id}", tasks_routes.ROW_PARAMS)):
        for spec in specs.values():
            if isinstance(spec, params.Number):
                for bound, step in ((spec.ge, -1), (spec.le, 1)):
                    if bound is not None:
                        cases += [(path, f"{spec.name}={int(bound)}", True)]
                        cases += [(path, f"{spec.name}={int(bound) + step}", False)]
            elif spec.max_length is not None:
                cases += [(path, f"{spec.name}={'x' * spec.max_length}", True)]
                cases += [(path, f"{spec.name}={'x' * (spec.max_length + 1)}", False)]
            else:
                cases += [(path, f"{spec.name}={c}", True) for c in spec.choices]
                cases += [(path, f"{spec.name}=other", False)]
    rows = "&".join([f"r={task.id}:1:v:0"] * watch.ROWS.max_items)
    cases += [("/watch", rows, True), ("/watch", rows + f"&r={task.id}:1:v:0", False)]
    for path, query, within in cases:
        read = fast.watch_params if path == "/watch" else fast.row_params
        if within:
            read({"query_string": query.encode()})
        else:
            with pytest.raises(Declined):
                read({"query_string": query.encode()})
    short = await _answers(page, [f"{p}?{q}" for p, q, _ in cases])
    router_only()
    assert short == await _answers(page, [f"{p}?{q}" for p, q, _ in cases])
    for (path, query, within), (status, _, _) in zip(cases, short, strict=True):
        assert (status < 400) == within, (path, query, status)
