"""The page watcher: one `GET /watch` per tick for everything a page shows that
changes by itself — its unfinished task rows, the notification bell, the worker badge and the
task list's "anything newer?" check.

The page sends what it shows (each row as `id:since:version:cancel`, the bell's unread count, the
badge's version, the list's newest id). Versions are read in one statement per kind of thing; when
nothing differs the answer is 204 with no body and nothing rendered. Otherwise it carries the
changed fragments only, each swapped out of band (`hx-swap-oob`), and — when a row has finished —
the `task-finished` event the ticket page and the bell listen for. Every answer says in
`X-Poll-In` when to ask again (ui.watch.polling.tick_in); ui/static/ui.js keeps the timer.

A row the viewer may not see answers exactly as a row that does not exist: "gone".

`polled` is the route's only handler, raw ASGI (ui.watch.polled_route): the edge calls it before
any routing, and the route hands it every GET.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from markupsafe import Markup

from desk.console import health
from desk.core.errors import ValidationProblem
from desk.core.models import TaskKind, TaskStatus
from desk.core.runtime import Runtime
from desk.ledger import lanes
from desk.ledger import rules as task_rules
from desk.reads import recall, tick
from desk.reads import tasks as reads
from desk.reads.bell import toast_for
from desk.reads.lookups import MAX_ID
from desk.reads.memory import Memory
from desk.reads.tasks import TaskPage
from ui import params, rowpiece, task_lists, viewer
from ui.params import Declined
from ui.render import render_html
from ui.taskview import TaskView
from ui.viewer import Viewer
from ui.watch import polling, unchanged
from ui.watch.polled_route import WATCH, PolledRoute, answers
from ui.watch.watched import Watched, parse_row
from web.auth import session_secret

router = APIRouter(route_class=PolledRoute)

MAX_ROWS = 60
LISTS = {"tasks": None, "imports": TaskKind.IMPORT}
# The query, declared once (ui.params reads it).
ROWS = params.Repeated("r", MAX_ROWS)
PARAMS: dict[str, params.Scalar] = {
    "bell": params.Number("bell", None, ge=-1),
    "health_v": params.Text("h", None, max_length=16),
    "list_name": params.Text("list", None, choices=tuple(LISTS)),
    "newest": params.Number("newest", 0, ge=0, le=MAX_ID),
    "mark": params.Number("mark", 0, ge=0, le=MAX_ID),
    "limit": params.Number("limit", task_lists.PANEL_SIZE, ge=1, le=task_lists.PAGE_SIZE),
}
READ_WAIT = 0.1  # seconds a tick waits for another's read of the rows it misses, at most
HEALTH_TTL = 2.0  # seconds one process reuses a worker-badge read (it scans Redis)


def row_version(row: tick.Row, now: datetime) -> str:
    """The version of a row as the page's copy carries it (`data-v`, polling.row_version)."""
    state = row.state
    paused = state.status == TaskStatus.WAITING and lanes.lane_of(state.kind) in row.paused_lanes
    return polling.row_version(row.updated_at, task_rules.status_label(state, now), paused)


def health_version(report: health.Health) -> str:
    """What the worker badge shows: queue reachable, and how many workers."""
    return f"{int(report.redis_ok)}-{len(report.workers)}"


async def health_now(request: Request, rt: Runtime) -> health.Health:
    """The badge's read, shared by this app's pages for HEALTH_TTL seconds; pages that ask
    while it runs wait for that one read instead of starting their own. Kept on the app's state:
    it goes with the app."""
    state = request.app.state
    hit: tuple[float, asyncio.Future[health.Health]] | None = getattr(state, "health_read", None)
    if hit is None or time.monotonic() - hit[0] >= HEALTH_TTL:
        hit = (time.monotonic(), asyncio.ensure_future(health.check(rt)))
        state.health_read = hit
    return await asyncio.shield(hit[1])


@dataclass
class Changes:
    rows: list[tuple[TaskView, Markup]]  # each changed row's view and markup (ui.rowpiece)
    gone: list[int]
    ages: list[float]
    html: list[str]

    @property
    def finished(self) -> list[TaskView]:
        return [r for r, _ in self.rows if not r.active]


def _rows(rt: Runtime, v: Viewer, watched: list[Watched], hits: dict[int, tick.Row]) -> Changes:
    """The rows whose version moved, rendered from the tick's read; the others only say when
    they are due."""
    clock = rt.clock()
    now = clock.timestamp()
    out = Changes([], [], [], [])
    for w in watched:
        age = now - min(w.since, now)
        hit = hits.get(w.id)
        if hit is None:
            out.gone.append(w.id)
        elif row_version(hit, clock) == w.version and age < polling.STOP_AFTER:  # still due
            out.ages.append(age)
        else:
            found = hit.hit()
            assert found.task is not None  # a tick's row is one the viewer may see
            view, html = rowpiece.piece(
                v.locale,
                v.tz,
                found.task,
                viewer_id=v.user_id,
                now=clock,
                since=w.since,
                title=found.ticket_title,
                paused_lanes=found.paused_lanes,
                cancel=w.cancel,
                oob=True,
            )
            out.rows.append((view, html))
            if view.poll_delay is not None:
                out.ages.append(age)
    return out


def _finished_trigger(finished: list[TaskView]) -> dict[str, str]:
    if not finished:
        return {}
    last = finished[-1]  # the ticket page and the bell refresh once, whichever finished
    event = {"id": last.id, "kind": last.task.kind, "status": last.label}
    return {"HX-Trigger": json.dumps({"task-finished": event})}


@dataclass
class Listing:
    """What the page's list gains: the whole list (it was empty) or only the newer rows."""

    name: str
    limit: int
    whole: task_lists.TaskListView | None = None
    fresh: Markup | None = None  # the newer rows, joined
    newest: int = 0


async def _listing(
    rt: Runtime, v: Viewer, name: str, newest: int, limit: int, page: TaskPage | None
) -> Listing | None:
    """None when no task newer than the page's newest row is visible, or when the viewer is no
    longer a member of the team the page shows (the page says so on reload). `page`: the
    list's rows newer than `newest`, read with the tick."""
    if page is None or not page.items:
        return None
    if newest == 0:  # the page says "No tasks yet": it gets the list itself (the same rows)
        kind = LISTS[name]
        whole = await task_lists.list_view(
            rt, v.user_id, page, limit, kind=kind, watch_url=f"/{name}"
        )
        return Listing(name, limit, whole=whole)
    fresh = rowpiece.listed(
        v.locale,
        v.tz,
        page.items,
        viewer_id=v.user_id,
        now=rt.clock(),
        titles=page.titles,
        paused_lanes=page.paused_lanes,
    )
    return Listing(name, limit, fresh=fresh, newest=max(t.id for t in page.items))


async def _bell(rt: Runtime, v: Viewer, seen: int, ctx: dict[str, Any]) -> list[str]:
    """The bell again when the unread count is not the page's; the newest as a toast if it grew."""
    # Read with the session (the tick, or BellViewer): no statement of its own.
    unread = v.unread if v.unread is not None else await reads.unread_count(rt.pg, v.user_id)
    if unread == seen:
        return []
    toast = await toast_for(rt.pg, v.user_id, seen, unread)
    bell_ctx = ctx | {"unread": unread, "toast": toast}
    return [render_html(v.locale, "base.html", bell_ctx, "bell")]


async def _health(
    request: Request, rt: Runtime, v: Viewer, shown: str, ctx: dict[str, Any]
) -> list[str]:
    """The worker badge again when what it says is not what the page shows."""
    report = await health_now(request, rt)
    if health_version(report) == shown:
        return []
    return [render_html(v.locale, "base.html", ctx | {"health": report}, "health")]


@router.get("/watch")
async def watch(request: Request) -> Response:
    """The route: its GETs are `polled`'s (PolledRoute), its other methods are refused."""
    return await polled(request)


@answers(WATCH)
async def polled(request: Request) -> Response:
    """`GET /watch`: the query read in its plain spelling, or — when odd — as a route reads it,
    after the session (a signed-out page is sent to sign in first); then `answer`."""
    rt = request.app.state.runtime
    try:
        query = params.read(request.scope, PARAMS, {"r": ROWS})
        watched = [parse_row(t) for t in query.pop("r")]
    except (Declined, ValidationProblem):
        await viewer.fragment_viewer(request, rt)
        query = params.strict(request.scope, PARAMS, {"r": ROWS})
        watched = [parse_row(t) for t in query.pop("r")]
    return await answer(request, rt, watched, **query)


async def _read(
    request: Request,
    rt: Runtime,
    secret: str,
    watched: list[Watched],
    list_name: str | None,
    newest: int,
    limit: int,
) -> tuple[Viewer, tick.Tick]:
    """The tick, remembered (desk/reads/recall.py) or read in its one statement, and its viewer
    (LoginRequired when signed out)."""
    team_id = viewer.team_cookie(request)
    ask = None if list_name is None else tick.ListAsk(team_id, newest, limit, LISTS[list_name])
    memory = memory_of(request)
    now = rt.clock()
    ids = [w.id for w in watched]
    found: tick.Tick | recall.Gap | None = recall.HARD
    if memory is not None:
        found = await recall.remembered(
            memory, secret, now, ids, team_id=team_id, listing=ask, wait=READ_WAIT
        )
    if isinstance(found, recall.Gap):
        found = await _fill(rt, memory, secret, now, ids, team_id, ask, found)
    v = viewer.viewer_of(request, found.session if found else None, team_id)
    assert found is not None  # viewer_of raised otherwise
    return v, found


async def _fill(
    rt: Runtime,
    memory: Memory | None,
    secret: str,
    now: datetime,
    ids: list[int],
    team_id: int | None,
    ask: tick.ListAsk | None,
    gap: recall.Gap,
) -> tick.Tick | None:
    """What the memory lacks, read: only that when it knows which (the rows, the list, the
    unread count), with a promise other ticks may wait on; else the whole tick."""
    if memory is None or gap.rows is None:
        return await _statement(rt, memory, secret, now, ids, team_id, ask)
    promised = memory.promise(gap.waits)
    listed = ask if gap.list_missing else None
    try:
        part = await _statement(rt, memory, secret, now, sorted(gap.rows), team_id, listed)
    finally:
        memory.settle(promised)
    return recall.fill(gap, part)


async def _statement(
    rt: Runtime,
    memory: Memory | None,
    secret: str,
    now: datetime,
    ids: list[int],
    team_id: int | None,
    ask: tick.ListAsk | None,
) -> tick.Tick | None:
    """The tick's one statement; what it read is remembered for the next ticks."""
    reading = memory.begin() if memory is not None else None
    try:
        found = await tick.tick(
            rt.pg, secret, now, ids, team_id=team_id, teams=team_id is None, listing=ask
        )
        if found is not None and memory is not None and reading is not None:
            unchanged.learn(memory, reading, secret, found, team_id)
        return found
    finally:
        if memory is not None:
            memory.end()


def memory_of(request: Request) -> Memory | None:
    """This app's memory of the change feed (api/app.py's lifespan makes it)."""
    return getattr(request.app.state, "memory", None)


def _headers(ages: list[float]) -> dict[str, str]:
    return {
        "X-Poll-In": f"{polling.tick_in(ages):.2f}",
        "Cache-Control": "no-store",
        "Vary": "HX-Request",
    }


def _vouch(
    request: Request,
    rt: Runtime,
    secret: str,
    watched: list[Watched],
    bell: int | None,
    list_name: str | None,
    after: int,
) -> unchanged.Vouch | None:
    """What the process's memory of the change feed vouches did not change (unchanged.py)."""
    memory = memory_of(request)
    if memory is None or not memory.trusted:
        return None
    return unchanged.vouch(
        memory,
        secret,
        viewer.team_cookie(request),
        rt.clock(),
        watched,
        bell=bell,
        list_kind=unchanged.MISSING if list_name is None else LISTS[list_name],
        after=after,
    )


async def answer(
    request: Request,
    rt: Runtime,
    watched: list[Watched],
    bell: int | None = None,
    health_v: str | None = None,
    list_name: str | None = None,
    newest: int = 0,
    limit: int = task_lists.PANEL_SIZE,
    mark: int = 0,
) -> Response:
    """204 when nothing the page shows changed; else the changed fragments, out of band.
    What the memory of the change feed vouches for is not read: all of it, and the answer is a
    204 without a statement."""
    secret = session_secret(rt, request) or ""
    vouched = _vouch(request, rt, secret, watched, bell, list_name, max(newest, mark))
    if vouched is not None and vouched.whole:
        report = await health_now(request, rt) if health_v is not None else None
        if report is None or health_version(report) == health_v:
            headers = _headers(list(vouched.rows.values()))
            if list_name is not None:
                headers["X-Watch-Mark"] = str(max(vouched.mark, mark))
            return Response(status_code=204, headers=headers)
    memory = memory_of(request)
    # Checked up to here once this read answers (taken before it: see desk.reads.memory).
    horizon = memory.horizon if memory is not None and memory.trusted else None
    known = vouched.rows if vouched is not None else {}
    asked = [w for w in watched if w.id not in known]
    quiet = vouched is not None and vouched.list_quiet and list_name is not None
    v, found = await _read(request, rt, secret, asked, None if quiet else list_name, newest, limit)
    changes = _rows(rt, v, asked, found.rows)
    changes.ages += known.values()
    ctx: dict[str, Any] = {"v": v, "request": request, "oob": True}
    if bell is not None:
        changes.html += await _bell(rt, v, bell, ctx)
    if health_v is not None:
        changes.html += await _health(request, rt, v, health_v, ctx)
    listing = None
    if list_name is not None and not quiet and v.team_id is not None:
        listing = await _listing(rt, v, list_name, newest, limit, found.listing)
    headers = _headers(changes.ages)
    if quiet and vouched is not None:
        headers["X-Watch-Mark"] = str(max(vouched.mark, mark))
    elif horizon is not None and list_name is not None and listing is None:
        headers["X-Watch-Mark"] = str(max(horizon, mark))
    if not (changes.rows or changes.gone or changes.html or listing):
        return Response(status_code=204, headers=headers)
    finished = changes.finished  # a pass over the rows: taken once for the announcer and event
    watch_ctx = ctx | {"gone": changes.gone, "listing": listing, "finished": finished}
    watch_ctx["rows"] = Markup("".join([html for _, html in changes.rows]))
    watch_ctx["fresh"] = listing.fresh if listing is not None and listing.fresh else Markup()
    body = render_html(v.locale, "watch.html", watch_ctx) + "".join(changes.html)
    headers |= _finished_trigger(finished)
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)
