"""The console's failures, grouped by normalised error: counts, first and last seen, a sample,
and "retry all" / "cancel all" in a group — each behind a confirmation that shows the count,
acting on exactly the tasks counted (ids up to the confirmed newest one)."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response

from desk.console import failures
from desk.core.errors import NotFound, ValidationProblem
from ui.console.pages import live_url, page_context, page_or_live, stream_url
from ui.console.route import ConsoleDep, ConsoleRoute
from ui.render import render
from ui.route import redirect
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)
KEY = re.compile(r"^[0-9a-f]{32}$")
ACTIONS = ("retry", "cancel")


def _key(key: str) -> str:
    if not KEY.match(key):
        raise NotFound()
    return key


@router.get("/ops/failures")
async def failures_page(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    watch: Annotated[float | None, Query(ge=0)] = None,
    done: str = "",
    n: Annotated[int, Query(ge=0)] = 0,
    skipped: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    url, delay = live_url(request, watch)
    context = page_context(
        c,
        request,
        groups=await failures.groups(rt, c.scope),
        done=done if done in ACTIONS else "",
        n=n,
        skipped=skipped,
        live_url=url,
        live_stream=stream_url(),
        delay=delay,
    )
    return page_or_live(request, "console/failures.html", context)


@router.get("/ops/failures/{key}/{action}")
async def confirm(
    request: Request, key: str, action: str, rt: RuntimeDep, c: ConsoleDep
) -> Response:
    if action not in ACTIONS:
        raise NotFound()
    group = await failures.group(rt, c.scope, _key(key))
    count, max_id = await failures.group_count(rt, c.scope, key, action)
    context = page_context(c, request, g=group, action=action, count=count, max_id=max_id)
    return render(request, "console/confirm.html", context)


@router.post("/ops/failures/{key}/{action}")
async def act(request: Request, key: str, action: str, rt: RuntimeDep, c: ConsoleDep) -> Response:
    if action not in ACTIONS:
        raise NotFound()
    form = await request.form()
    raw = str(form.get("max_id") or "")
    if not raw.isdigit():
        raise ValidationProblem("max_id", "confirm the action from its confirmation page")
    run = failures.retry_group if action == "retry" else failures.cancel_group
    outcome = await run(rt, c.scope, _key(key), int(raw))
    query = urlencode({"done": action, "n": len(outcome.done), "skipped": outcome.skipped})
    return redirect(request, f"/ops/failures?{query}")
