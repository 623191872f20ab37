"""The console's workers (live registrations from their heartbeats; those that vanished in the
last hour and what the rescuer took back from them), lanes (slots in use, pause and resume —
operators only, audited) and the audit trail."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request, Response

from desk.console import health
from desk.core.errors import NotFound
from desk.core.runtime import Runtime
from desk.ledger import events
from desk.people import audit
from desk.people.operators import Scope
from ui.console import lanes_view
from ui.console.pages import live_url, page_context, page_or_live, stream_url
from ui.console.route import ConsoleDep, ConsoleRoute
from ui.render import render
from ui.route import redirect
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)
TASK_KEYS = ("current", "tasks", "task_ids", "current_tasks", "running_tasks")


def _current_tasks(worker: dict[str, Any]) -> list[int]:
    for key in TASK_KEYS:
        value = worker.get(key)
        if isinstance(value, list):
            return [int(x) for x in value if str(x).isdigit()]
    return []


async def _visible(rt: Runtime, scope: Scope, ids: set[int]) -> set[int]:
    """The ids among `ids` the viewer may see (a team admin: their teams' tasks only)."""
    if scope.operator or not ids:
        return ids
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            sa.text("SELECT id FROM background_task WHERE id = ANY(:ids) AND team_id = ANY(:t)"),
            {"ids": list(ids), "t": list(scope.team_ids)},
        )
        return {r.id for r in rows}


def _beat(worker: dict[str, Any]) -> datetime | None:
    raw = worker.get("last_beat") or worker.get("last_sweep")
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


@router.get("/ops/workers")
async def workers_page(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    watch: Annotated[float | None, Query(ge=0)] = None,
) -> Response:
    status = await health.check(rt)
    live = [dict(w) for w in status.workers]
    wanted = {i for w in live for i in _current_tasks(w)}
    visible = await _visible(rt, c.scope, wanted)
    for w in live:
        w["_tasks"] = [i for i in _current_tasks(w) if i in visible]
        w["_beat"] = _beat(w)
    where, params = c.scope.sql()
    gone = await events.vanished(rt, {str(w.get("id")) for w in live}, where, params)
    url, delay = live_url(request, watch)
    context = page_context(
        c,
        request,
        health=status,
        workers=live,
        vanished=gone,
        live_url=url,
        live_stream=stream_url(),
        delay=delay,
    )
    return page_or_live(request, "console/workers.html", context)


@router.get("/ops/lanes")
async def lanes_page(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    watch: Annotated[float | None, Query(ge=0)] = None,
) -> Response:
    status = await health.check(rt)
    url, delay = live_url(request, watch)
    context = page_context(
        c,
        request,
        lanes=await lanes_view.lanes_now(rt, status.workers),
        workers=len(status.workers),
        live_url=url,
        live_stream=stream_url(),
        delay=delay,
    )
    return page_or_live(request, "console/lanes.html", context)


@router.post("/ops/lanes/{lane}/{action}")
async def pause_or_resume(
    request: Request, lane: str, action: str, rt: RuntimeDep, c: ConsoleDep
) -> Response:
    """A lane serves every team: only an operator may pause or resume it."""
    if action not in ("pause", "resume") or not c.scope.operator:
        raise NotFound()
    await lanes_view.set_paused(rt, c.scope, lane, action == "pause")
    return redirect(request, "/ops/lanes")


@router.get("/ops/audit")
async def audit_page(request: Request, rt: RuntimeDep, c: ConsoleDep) -> Response:
    entries = await audit.recent(
        rt, operator=c.scope.operator, team_ids=c.scope.team_ids, limit=200
    )
    return render(request, "console/audit.html", page_context(c, request, entries=entries))
