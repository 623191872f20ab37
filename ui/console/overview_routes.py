"""The console's overview (/ops): counts per kind and lane, throughput and failures per minute
over the last hour and day, start latency and reminder lateness, the oldest overdue task, live
workers and the latest console actions — one live block, refreshed as the work changes."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from desk.console import health
from desk.console import overview as console
from desk.people import audit
from ui.console import lanes_view
from ui.console.charts import chart
from ui.console.pages import live_url, page_context, page_or_live, stream_url
from ui.console.route import ConsoleDep, ConsoleRoute
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)


@router.get("/ops")
async def overview(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    watch: Annotated[float | None, Query(ge=0)] = None,
) -> Response:
    data = await console.overview(rt, c.scope)
    status = await health.check(rt)
    lanes = await lanes_view.lanes_now(rt, status.workers)
    recent = await audit.recent(rt, operator=c.scope.operator, team_ids=c.scope.team_ids, limit=5)
    url, delay = live_url(request, watch)
    context = page_context(
        c,
        request,
        o=data,
        hour=chart(data.hour),
        day=chart(data.day),
        health=status,
        lanes=lanes,
        lane_of=lanes_view.lane_of,
        paused=[lane for lane in lanes if lane.paused],
        recent=recent,
        live_url=url,
        live_stream=stream_url(),
        delay=delay,
    )
    return page_or_live(request, "console/overview.html", context)
