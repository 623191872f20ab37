"""The polled fragments (ui.watch.polled): the htmx row of `GET /tasks/{id}` and `GET /watch`, each
answered by one handler — every answer, by role, in two languages and two time zones, every
refusal; the same handler whether the edge or the router hands it the request; and the row
render cache (ui.rowcache) never shows one viewer's or one moment's row to another."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from desk.reads import tasks as reads
from desk.reads import tick
from desk.work import tasks
from jobs.execution import execute
from jobs.processors import registry
from tests.conftest import FakeClock
from ui import rowcache, tasks_routes
from ui.watch import polled, watcher
from ui.watch.polled import Declined

NOW = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
STAMP = int(NOW.timestamp())
FRAGMENT = [  # what a polled fragment's answer carries besides its length, in this order
    ("content-type", "text/html; charset=utf-8"),
    ("vary", "HX-Request"),
    ("cache-control", "no-store"),
]
REFUSED = [*FRAGMENT, ("hx-retarget", "#flash"), ("hx-reswap", "innerHTML")]
SECURITY = ["x-content-type-options", "x-frame-options", "referrer-policy"]
SECURITY += ["content-security-policy", "x-request-id"]


@pytest.fixture
def clock() -> FakeClock:
    """A fixed moment: the rows' times, `since` and versions are the same on every run."""
    return FakeClock(NOW)


@pytest.fixture
async def made(world: Any, rt: Any) -> dict[str, int]:
    """The staff member's unfinished export, the customer's, the staff member's finished one."""
    mine = await tasks.create_export(rt, world.staff, world.team, {"q": "mine"})
    theirs = await tasks.create_export(rt, world.customer, world.team, {"q": "theirs"})
    done = await tasks.create_export(rt, world.staff, world.team, {"q": "done"})
    assert await execute(rt, registry(), done.id, done.run) == "done"
    return {"mine": mine.id, "theirs": theirs.id, "done": done.id}


def _head(r: Any) -> list[tuple[str, str]]:
    """The answer's own headers (the edge's security headers and request id are checked apart)."""
    got = [(k.decode(), v.decode()) for k, v in r.headers.raw]
    assert [k for k, _ in got[-len(SECURITY) :]] == SECURITY
    return got[: -len(SECURITY)]


def _row(task_id: int, words: str, *, since: str, version: str, zone_time: str) -> str:
    return (
        f'<li id="task-{task_id}" class="task tone-wait" data-task-id="{task_id}" '
        f'data-status="Queued" data-active data-poll data-since="{since}" data-delay="1" '
        f'data-v="{version}" data-cancel="1">\n'
        '  <div class="task-head">\n'
        f'    <span class="kind">Export <a href="/tasks/{task_id}">#{task_id}</a></span>\n'
        '    <span class="status badge tone-wait">Queued</span>\n'
        "  </div>\n"
        f'  <div class="covers">All tickets with &#34;{words}&#34; in the title</div>\n'
        '  <div class="meta">\n'
        f"    <span>Created {zone_time}</span>\n"
        "  </div>\n"
        '  <div class="actions">\n'
        f'<button type="button" hx-post="/tasks/{task_id}/cancel" hx-target="#task-{task_id}" '
        'hx-swap="outerHTML">Cancel</button>  </div>\n'
        "</li>\n\n"
    )


def _version(text: str) -> str:
    return text.split('data-v="')[1].split('"')[0]


async def test_an_unfinished_row_in_english_and_utc(page_as, world, made) -> None:
    page = await page_as(world.staff)
    r = await page.hx_get(f"/tasks/{made['mine']}")
    body = _row(
        made["mine"],
        "mine",
        since=f"{STAMP}.123",
        version=_version(r.text),
        zone_time="2026-03-04 05:06",
    )
    assert r.status_code == 200 and r.text == body
    assert _head(r) == [("content-length", str(len(body.encode()))), *FRAGMENT]
    # The same row, watched since an earlier moment; after ten minutes it stops polling itself.
    r = await page.hx_get(f"/tasks/{made['mine']}?since={STAMP - 2}.5")
    assert f'data-since="{STAMP - 2}.500" data-delay="1"' in r.text
    r = await page.hx_get(f"/tasks/{made['mine']}?since={STAMP - 700}")
    assert "data-poll" not in r.text and "Stopped checking automatically." in r.text


async def test_a_finished_row_announces_itself(page_as, world, made) -> None:
    page = await page_as(world.staff)
    r = await page.hx_get(f"/tasks/{made['done']}")
    assert r.status_code == 200 and "data-poll" not in r.text
    assert "<span>Attempt 1 of 5</span>    <span>Created 2026-03-04 05:06</span>" in r.text
    assert f'href="/tasks/{made["done"]}/download">Download CSV</a>' in r.text
    assert r.text.endswith(
        '<div id="announcer" class="visually-hidden" aria-live="polite" '
        f'hx-swap-oob="innerHTML">Export #{made["done"]}: Completed</div>\n'
    )
    trigger = (
        f'{{"task-finished": {{"id": {made["done"]}, "kind": "EXPORT", "status": "Completed"}}}}'
    )
    assert _head(r) == [("content-length", str(len(r.content))), *FRAGMENT, ("hx-trigger", trigger)]


async def test_many_finished_rows_are_announced_a_few_by_name(page_as, world, rt) -> None:
    done = []
    for q in ("a", "b", "c", "d", "e"):
        task = await tasks.create_export(rt, world.staff, world.team, {"q": q})
        assert await execute(rt, registry(), task.id, task.run) == "done"
        done.append(task.id)
    page = await page_as(world.staff)
    rows = "&".join(f"r={i}:{STAMP}:old:0" for i in done)
    r = await page.hx_get(f"/watch?{rows}")
    assert r.status_code == 200 and r.text.count('data-status="Completed"') == 5
    named = "; ".join(f"Export #{i}: Completed" for i in done[:3])
    assert r.text.endswith(
        '<div id="announcer" class="visually-hidden" aria-live="polite" '
        f'hx-swap-oob="innerHTML">{named}; and 2 more finished</div>\n'
    )
    async with rt.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE app_user SET locale = 'zh-CN'"))
    r = await page.hx_get(f"/watch?{rows}")
    assert r.text.endswith("; 另有 2 个已结束</div>\n")


async def test_rows_in_chinese_and_shanghai_time(page_as, world, made, rt) -> None:
    async with rt.engine.begin() as conn:
        await conn.execute(
            sa.text("UPDATE app_user SET locale = 'zh-CN', timezone = 'Asia/Shanghai'")
        )
    page = await page_as(world.staff)
    r = await page.hx_get(f"/tasks/{made['mine']}")
    english = _row(
        made["mine"],
        "mine",
        since=f"{STAMP}.123",
        version=_version(r.text),
        zone_time="2026-03-04 05:06",
    )
    chinese = (
        english.replace(">Export <", ">导出 <")
        .replace(">Queued<", ">排队中<")
        .replace("All tickets with &#34;mine&#34; in the title", "全部工单，标题包含“mine”")  # noqa: RUF001
        .replace("<span>Created 2026-03-04 05:06", "<span>创建于 2026-03-04 13:06")  # UTC+8
        .replace(">Cancel<", ">取消<")
    )
    assert (r.status_code, r.text) == (200, chinese)
    done = await page.hx_get(f"/tasks/{made['done']}")
    assert "<span>创建于 2026-03-04 13:06</span>" in done.text
    assert '<span class="status badge tone-ok">已完成</span>' in done.text
    assert f"导出 #{made['done']}: 已完成</div>" in done.text
    missing = await page.hx_get("/tasks/99999")
    assert (missing.status_code, missing.text) == (
        404,
        '<p class="msg error" data-status="404">未找到该任务。</p>\n',
    )
    w = await page.hx_get(f"/watch?r={made['mine']}:{STAMP}:old:1")
    assert "2026-03-04 13:06" in w.text and 'hx-swap-oob="true"' in w.text


async def test_the_readers_language_is_the_users_before_the_browsers(page_as, world, made) -> None:
    page = await page_as(world.staff)
    english = await page.hx_get(f"/tasks/{made['done']}")
    chinese = await page.hx_get(f"/tasks/{made['done']}", headers={"Accept-Language": "zh-CN"})
    assert english.text == chinese.text and "Completed" in chinese.text


# Who sees which row: an export is its creator's alone, whatever the role (the admin's too);
# a member of another team sees none of this team's.
SEES = {"admin": set(), "staff": {"mine", "done"}, "customer": {"theirs"}, "outsider": set()}


@pytest.mark.parametrize("role", sorted(SEES))
async def test_rows_by_role(page_as, world, made, role) -> None:
    page = await page_as(getattr(world, role))
    missing = await page.hx_get("/tasks/99999")
    assert (missing.status_code, missing.text) == (
        404,
        '<p class="msg error" data-status="404">Task not found.</p>\n',
    )
    assert _head(missing) == [("content-length", "59"), *REFUSED]
    for name, task_id in made.items():
        r = await page.hx_get(f"/tasks/{task_id}")
        if name in SEES[role]:
            assert r.status_code == 200 and f'id="task-{task_id}"' in r.text
            assert ("hx-trigger" in r.headers) == (name == "done")
        else:  # a row not theirs answers exactly as one that does not exist
            assert (r.status_code, r.headers.raw, r.content) == (
                missing.status_code,
                missing.headers.raw,
                missing.content,
            )
    # The watcher: each watched row they see comes back (it changed: "old"), the others gone.
    rows = "&".join(f"r={task_id}:{STAMP}:old:1" for task_id in made.values())
    r = await page.hx_get(f"/watch?{rows}")
    assert r.status_code == 200
    for name, task_id in made.items():
        shown = f'<li id="task-{task_id}" class="task tone-'
        if name in SEES[role]:
            assert shown in r.text and 'data-status="Not found"' not in r.text.split(shown)[1][:80]
        else:
            assert f'{shown}muted" data-task-id="{task_id}" data-status="Not found"' in r.text
    finished = "done" in SEES[role]
    assert ("task-finished" in r.headers.get("hx-trigger", "")) == finished
    assert r.headers["x-poll-in"] == ("0.88" if SEES[role] - {"done"} else "5.00")


async def test_the_watcher_answers(page_as, world, made) -> None:
    page = await page_as(world.staff)
    # One unread notification: the finished export's "Export #N is ready".
    nothing = await page.hx_get("/watch?bell=1")
    assert (nothing.status_code, nothing.content) == (204, b"")
    assert _head(nothing) == [
        ("x-poll-in", "5.00"),
        ("cache-control", "no-store"),
        ("vary", "HX-Request"),
    ]
    first = await page.hx_get(f"/tasks/{made['mine']}?since={STAMP}")
    version = _version(first.text)
    same = await page.hx_get(f"/watch?r={made['mine']}:{STAMP}:{version}:1")
    assert same.status_code == 204 and same.headers["x-poll-in"] == "0.88"
    later = await page.hx_get(f"/watch?r={made['mine']}:{STAMP - 3}:{version}:1")
    assert later.status_code == 204 and later.headers["x-poll-in"] == "0.88"
    whole = await page.hx_get(
        f"/watch?r={made['mine']}:{STAMP}:{version}:1&bell=-1&h=x&list=tasks&newest=0&limit=8"
    )
    assert whole.status_code == 200
    assert '<div id="tasks" hx-swap-oob="innerHTML">' in whole.text
    assert f'data-list="tasks" data-newest="{made["done"]}" data-limit="8"' in whole.text
    assert _head(whole)[:2] == [("x-poll-in", "0.88"), ("cache-control", "no-store")]


# Each refusal, in the route's order (the rows, then bell, h, list, newest, limit).
WATCH_REFUSALS = {
    "bell=-5": "bell: Input should be greater than or equal to -1",
    "list=admin": "list: String should match pattern &#39;^(tasks|imports)$&#39;",
    "limit=99": "limit: Input should be less than or equal to 50",
    "limit=0": "limit: Input should be greater than or equal to 1",
    "h=" + "x" * 17: "h: String should have at most 16 characters",
    "newest=-1&limit=99": "newest: Input should be greater than or equal to 0",
    "r=bad&limit=99": "limit: Input should be less than or equal to 50",
    "&".join(["r=1:1:v:0"] * 61): "r: List should have at most 60 items after validation, not 61",
}
ROW_REFUSALS = {
    "since=abc": "since: Input should be a valid number, unable to parse string as a number",
    "since=": "since: Input should be a valid number, unable to parse string as a number",
    "since=%00": "since: Input should be a valid number, unable to parse string as a number",
    "since=1&since=x": "since: Input should be a valid number, unable to parse string as a number",
    "since=-1": "since: Input should be greater than or equal to 0",
    "since=nan": "since: Input should be greater than or equal to 0",
}


async def test_refusals(page_as, world, made) -> None:
    page = await page_as(world.staff)

    async def refused(url: str, status: int, message: str) -> None:
        r = await page.hx_get(url)
        text = f'<p class="msg error" data-status="{status}">{message}</p>\n'
        assert (r.status_code, r.text) == (status, text), url
        assert _head(r) == [("content-length", str(len(r.content))), *REFUSED], url

    for query, message in WATCH_REFUSALS.items():
        await refused(f"/watch?{query}", 400, message)
    for query, message in ROW_REFUSALS.items():
        await refused(f"/tasks/{made['mine']}?{query}", 400, message)
    for token in ("bad", "1:2:v:2", "0:1:v:0", "1:1e12:v:0"):
        await refused(f"/watch?r={token}", 422, "r: each row as id:since:version:cancel")
    for path in ("abc", "%00", "1%20x"):  # an id that is no number is not a thing
        await refused(f"/tasks/{path}", 404, "Not found.")
    for path in ("0", "-5", "99999999999999999999"):  # a number that is no task's id
        await refused(f"/tasks/{path}", 404, "Task not found.")
    # Odd spellings a route reads as the plain ones.
    plain = (await page.hx_get(f"/tasks/{made['mine']}")).text
    assert (await page.hx_get(f"/tasks/0{made['mine']}")).text == plain
    assert (await page.hx_get(f"/tasks/+{made['mine']}")).text == plain
    assert (await page.hx_get("/watch?bell=+1&newest=01")).status_code in (200, 204)


async def test_signed_out_polls_go_to_sign_in(page_as, made) -> None:
    anonymous = await page_as(None)
    came_from = {"HX-Current-URL": "http://test/tickets?q=1"}
    for url in (
        f"/tasks/{made['mine']}",
        f"/tasks/{made['mine']}?since=abc",  # the session is read before the query
        "/tasks/abc",
        "/watch?bell=-1",
        "/watch?limit=99",
        "/watch?r=bad",
    ):
        r = await anonymous.hx_get(url, headers=came_from)
        assert (r.status_code, r.content) == (204, b""), url
        assert r.headers["hx-redirect"] == "/login?next=/tickets%3Fq%3D1", url


async def test_a_database_outage_is_the_pages_503(page_as, world, made, monkeypatch) -> None:
    page = await page_as(world.staff)

    async def down(*args: Any, **kw: Any) -> Any:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(reads, "viewer", down)
    monkeypatch.setattr(tick, "tick", down)
    for url in (f"/tasks/{made['mine']}", "/watch?bell=-1"):
        r = await page.hx_get(url)
        assert r.status_code == 503 and r.headers["retry-after"] == "5", url
        assert r.headers["hx-retarget"] == "#flash" and "connection refused" not in r.text


async def test_other_methods_and_the_page_go_the_routers_way(page_as, world, made) -> None:
    page = await page_as(world.staff)
    for method in ("POST", "HEAD"):
        r = await page.request(method, "/watch", headers={"HX-Request": "true"})
        assert r.status_code == 405 and r.headers["allow"] == "GET"
    r = await page.get(f"/tasks/{made['mine']}")  # no htmx: the task's small page
    assert r.status_code == 200 and r.text.startswith("<!doctype html>")
    restore = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
    assert (await page.get(f"/tasks/{made['mine']}", headers=restore)).text.startswith(
        "<!doctype html>"
    )


async def test_polls_are_answered_by_the_handler_and_logged_under_the_route(
    page_as, world, made, caplog, monkeypatch
) -> None:
    page = await page_as(world.staff)
    taken: list[str] = []
    answer = polled.Polled.__call__

    async def spy(self: Any, scope: Any, receive: Any) -> Any:
        got = await answer(self, scope, receive)
        if got is not None:
            taken.append(scope["path"])
        return got

    monkeypatch.setattr(polled.Polled, "__call__", spy)
    with caplog.at_level(logging.INFO, logger="taskdesk.http"):
        assert (await page.hx_get(f"/tasks/{made['mine']}")).status_code == 200
        assert (await page.hx_get("/watch?limit=99")).status_code == 400
    routes = [getattr(r, "route", None) for r in caplog.records if r.name == "taskdesk.http"]
    assert routes == ["/tasks/{task_id}", "/watch"]
    assert taken == [f"/tasks/{made['mine']}", "/watch"]  # both, refusals included


@pytest.mark.parametrize("query", [b"since=", b"since=-1", b"since=1e3", b"since=nan"])
def test_the_plain_reader_declines_odd_spellings(query: bytes) -> None:
    with pytest.raises(Declined):
        polled.row_params({"query_string": query})


def test_watch_parameters_as_the_route_reads_them() -> None:
    got = polled.watch_params({"query_string": b"r=1:2:v:1&r=2:2:v:0&bell=-1&h=1-2&newest=7"})
    assert got == {
        "r": ["1:2:v:1", "2:2:v:0"],
        "bell": -1,
        "health_v": "1-2",
        "list_name": None,
        "newest": 7,
        "mark": 0,
        "limit": 8,
    }
    for odd in (b"bell=+1", b"newest=01", b"limit=0", b"limit=51", b"h=" + b"x" * 17):
        with pytest.raises(Declined):
            polled.watch_params({"query_string": odd})
    with pytest.raises(Declined):
        polled.watch_params({"query_string": b"&".join([b"r=1:2:v:1"] * 61)})


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


async def test_every_bound_of_the_spec(page_as, world, rt) -> None:
    """Every bound of the spec (ui.watch.watcher.PARAMS, ui.tasks_routes.ROW_PARAMS): the value on it
    is taken by the plain reader and answered, the one past it declined by the plain reader and
    refused with a 400."""
    from ui import params

    task = await tasks.create_export(rt, world.staff, world.team, {})
    page = await page_as(world.staff)
    cases: list[tuple[str, str, bool]] = []  # (path, query, within)
    for path, specs in (("/watch", watcher.PARAMS), (f"/tasks/{task.id}", tasks_routes.ROW_PARAMS)):
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
    rows = "&".join([f"r={task.id}:1:v:0"] * watcher.ROWS.max_items)
    cases += [("/watch", rows, True), ("/watch", rows + f"&r={task.id}:1:v:0", False)]
    for path, query, within in cases:
        read = polled.watch_params if path == "/watch" else polled.row_params
        if within:
            read({"query_string": query.encode()})
        else:
            with pytest.raises(Declined):
                read({"query_string": query.encode()})
        status = (await page.hx_get(f"{path}?{query}")).status_code
        assert (status < 400) == within and status in (200, 204, 400), (path, query, status)
