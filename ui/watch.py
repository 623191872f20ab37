"""The page watcher (issue 11): one `GET /watch` per tick for everything a page shows that
changes by itself — its unfinished task rows, the notification bell, the worker badge and the
task list's "anything newer?" check.

The page sends what it shows (each row as `id:since:version:cancel`, the bell's unread count, the
badge's version, the list's newest id). Versions are read in one statement per kind of thing; when
nothing differs the answer is 204 with no body and nothing rendered. Otherwise it carries the
changed fragments only, each swapped out of band (`hx-swap-oob`), and — when a row has finished —
the `task-finished` event the ticket page and the bell listen for. Every answer says in
`X-Poll-In` when to ask again (ui.polling.tick_in); ui/static/ui.js keeps the timer.

A row the viewer may not see answers exactly as a row that does not exist: "gone".
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request, Response

from api.auth import RuntimeDep
from desk import access, health, lanes, notifications, reads, task_rules
from desk.errors import NotFound, ValidationProblem
from desk.models import Role, TaskKind
from desk.runtime import Runtime
from ui import params, polling, task_lists
from ui.render import render_html
from ui.route import UiRoute
from ui.taskview import TaskView
from ui.viewer import BellViewer, Viewer

router = APIRouter(route_class=UiRoute)

MAX_ROWS = 60
LISTS = {"tasks": None, "imports": TaskKind.IMPORT}
# The query, declared once for the route and the short way (ui.fast).
ROWS = params.Repeated("r", MAX_ROWS)
PARAMS: dict[str, params.Scalar] = {
    "bell": params.Number("bell", None, ge=-1),
    "health_v": params.Text("h", None, max_length=16),
    "list_name": params.Text("list", None, choices=tuple(LISTS)),
    "newest": params.Number("newest", 0, ge=0),
    "limit": params.Number("limit", task_lists.PANEL_SIZE, ge=1, le=task_lists.PAGE_SIZE),
}
HEALTH_TTL = 2.0  # seconds one process reuses a worker-badge read (it scans Redis)


@dataclass(frozen=True)
class Watched:
    id: int
    since: float
    version: str
    cancel: bool


@dataclass(frozen=True)
class _Task:
    """The fields `task_rules.status_label` reads, from the version statement."""

    kind: str
    status: str
    owner_id: int
    cancel_requested: bool
    result_bytes: int | None
    expires_at: datetime | None
    attempts: int
    run_at: datetime
    result_skipped: bool
    lease_until: datetime | None


def parse_row(token: str) -> Watched:
    """`id:since:version:cancel` as the page's rows render it; anything else is a clear 400."""
    parts = token.split(":")
    try:
        if len(parts) != 4 or parts[3] not in ("0", "1"):
            raise ValueError
        row = Watched(int(parts[0]), float(parts[1]), parts[2], parts[3] == "1")
    except ValueError:
        raise ValidationProblem("r", "each row as id:since:version:cancel") from None
    if row.id <= 0 or not 0 <= row.since < 1e11 or len(row.version) > 16:
        raise ValidationProblem("r", "each row as id:since:version:cancel")
    return row


# Read as tuple rows: id, team, the reader's role, the version's time, the paused lanes, then
# `_Task`'s fields in its order.
_VERSIONS_SQL = (
    "SELECT t.id, t.team_id, m.role, (extract(epoch FROM t.updated_at) * 1000000)::bigint,"
    " ARRAY(SELECT name FROM task_lane WHERE paused), t.kind, t.status, t.owner_id,"
    " t.cancel_requested, t.result_bytes, t.expires_at, t.attempts, t.run_at, t.result_skipped,"
    " t.lease_until"
    " FROM background_task t"
    " LEFT JOIN membership m ON m.team_id = t.team_id AND m.user_id = %(me)s"
    " WHERE t.id = ANY(%(ids)s)"
)


async def row_versions(rt: Runtime, user_id: int, ids: list[int]) -> dict[int, str]:
    """One statement: the version of each row the viewer may see (invisible = absent)."""
    if not ids:
        return {}
    now = rt.clock()
    out: dict[int, str] = {}
    for task_id, team_id, role, updated_us, paused_lanes, *rest in await rt.pg.rows(
        _VERSIONS_SQL, {"me": user_id, "ids": ids}
    ):
        if role is None:
            continue
        task = _Task(*rest)
        if not access.can_see_task(
            access.Member(user_id, team_id, Role(role)), task.kind, task.owner_id
        ):
            continue
        paused = task.status == "WAITING" and lanes.lane_of(task.kind) in paused_lanes
        out[task_id] = polling.version(updated_us, task_rules.status_label(task, now), paused)
    return out


def health_version(report: health.Health) -> str:
    """What the worker badge shows: queue reachable, and how many workers."""
    return f"{int(report.redis_ok)}-{len(report.workers)}"


_health_cache: dict[int, tuple[float, asyncio.Future[health.Health]]] = {}


async def health_now(rt: Runtime) -> health.Health:
    """The badge's read, shared by this process's pages for HEALTH_TTL seconds; pages that ask
    while it runs wait for that one read instead of starting their own."""
    hit = _health_cache.get(id(rt))
    if hit is None or time.monotonic() - hit[0] >= HEALTH_TTL:
        hit = (time.monotonic(), asyncio.ensure_future(health.check(rt)))
        _health_cache[id(rt)] = hit
    return await asyncio.shield(hit[1])


@dataclass
class Changes:
    rows: list[tuple[TaskView, bool]]
    gone: list[int]
    ages: list[float]
    html: list[str]

    @property
    def finished(self) -> list[TaskView]:
        return [r for r, _ in self.rows if not r.active]


async def _rows(rt: Runtime, v: Viewer, watched: list[Watched]) -> Changes:
    """Two statements at most: the versions of all the page's rows, then the rows whose
    version moved (rendered, the others not even read)."""
    versions = await row_versions(rt, v.user_id, [w.id for w in watched])
    now = rt.clock().timestamp()
    changed: list[tuple[Watched, float]] = []
    out = Changes([], [], [], [])
    for w in watched:
        age = now - min(w.since, now)
        if w.id not in versions:
            out.gone.append(w.id)
        elif versions[w.id] == w.version and polling.due_in(age) is not None:
            out.ages.append(age)
        else:
            changed.append((w, age))
    hits = await reads.tasks(rt.pg, v.user_id, [w.id for w, _ in changed])
    for w, age in changed:
        if w.id not in hits:  # gone between the two reads
            out.gone.append(w.id)
            continue
        view = await task_lists.row(rt, v.user_id, w.id, w.since, found=hits[w.id])
        out.rows.append((view, w.cancel))
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
    fresh: list[TaskView] | None = None
    newest: int = 0


async def _listing(
    rt: Runtime, user_id: int, team_id: int, name: str, newest: int, limit: int
) -> Listing | None:
    """None when no task newer than the page's newest row is visible (one indexed read)."""
    kind = LISTS[name]
    try:
        # One statement on rt.pg: the rows with their reminders' titles and the paused lanes.
        page = await reads.list_tasks(
            rt.pg, user_id, team_id, first=limit, newer_than=newest, kind=kind
        )
        if not page.items:
            return None
        if newest == 0:  # the page says "No tasks yet": it gets the list itself
            whole = await task_lists.task_list(
                rt, user_id, team_id, limit=limit, kind=kind, watch_url=f"/{name}"
            )
            return Listing(name, limit, whole=whole)
        fresh = await task_lists.views(
            rt, user_id, page.items, titles=page.titles, paused=page.paused_lanes
        )
    except NotFound:  # no longer a member of the team the page shows: the page says so on reload
        return None
    return Listing(name, limit, fresh=fresh, newest=max(r.id for r in fresh))


async def _bell(rt: Runtime, v: Viewer, seen: int, ctx: dict[str, Any]) -> list[str]:
    """The bell again when the unread count is not the page's; the newest as a toast if it grew."""
    # Read with the session (BellViewer): no statement of its own.
    unread = v.unread if v.unread is not None else await reads.unread_count(rt.pg, v.user_id)
    if unread == seen:
        return []
    toast = None
    if 0 <= seen < unread:
        page = await notifications.list_notifications(rt, v.user_id, unread_only=True, first=1)
        toast = page.items[0] if page.items else None
    bell_ctx = ctx | {"unread": unread, "toast": toast}
    return [render_html(v.locale, "base.html", bell_ctx, "bell")]


async def _health(rt: Runtime, v: Viewer, shown: str, ctx: dict[str, Any]) -> list[str]:
    """The worker badge again when what it says is not what the page shows."""
    report = await health_now(rt)
    if health_version(report) == shown:
        return []
    return [render_html(v.locale, "base.html", ctx | {"health": report}, "health")]


_P = PARAMS


@router.get("/watch")
async def watch(
    request: Request,
    rt: RuntimeDep,
    v: BellViewer,
    r: Annotated[list[str], ROWS.query()] = [],  # noqa: B006 - FastAPI copies query defaults
    bell: Annotated[int | None, _P["bell"].query()] = _P["bell"].default,
    health_v: Annotated[str | None, _P["health_v"].query()] = _P["health_v"].default,
    list_name: Annotated[str | None, _P["list_name"].query()] = _P["list_name"].default,
    newest: Annotated[int, _P["newest"].query()] = _P["newest"].default,
    limit: Annotated[int, _P["limit"].query()] = _P["limit"].default,
) -> Response:
    """204 when nothing the page shows changed; else the changed fragments, out of band."""
    changes = await _rows(rt, v, [parse_row(t) for t in r])
    ctx: dict[str, Any] = {"v": v, "request": request, "oob": True}
    if bell is not None:
        changes.html += await _bell(rt, v, bell, ctx)
    if health_v is not None:
        changes.html += await _health(rt, v, health_v, ctx)
    listing = None
    if list_name is not None and v.team_id is not None:
        listing = await _listing(rt, v.user_id, v.team_id, list_name, newest, limit)
    headers = {
        "X-Poll-In": f"{polling.tick_in(changes.ages):.2f}",
        "Cache-Control": "no-store",
        "Vary": "HX-Request",
    }
    if not (changes.rows or changes.gone or changes.html or listing):
        return Response(status_code=204, headers=headers)
    watch_ctx = ctx | {"rows": changes.rows, "gone": changes.gone, "listing": listing}
    watch_ctx["finished"] = changes.finished
    body = render_html(v.locale, "watch.html", watch_ctx) + "".join(changes.html)
    headers |= _finished_trigger(changes.finished)
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)
