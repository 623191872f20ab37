"""The console's mailboxes: every mailbox of the teams in scope (an operator: every team) with
its last good fetch, lag and last error, the errors grouped as on the failures page, and an
alert naming the mailboxes not fetched for MAILBOX_STALE_MINUTES. The rules are
`desk.console.mailboxes`'; who sees the console at all is `ui.console.route`'s."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from desk.console import mailboxes
from ui.console.pages import live_url, page_context, page_or_live, stream_url
from ui.console.route import ConsoleDep, ConsoleRoute
from web.auth import RuntimeDep

router = APIRouter(route_class=ConsoleRoute)


@router.get("/ops/mailboxes")
async def mailboxes_page(
    request: Request,
    rt: RuntimeDep,
    c: ConsoleDep,
    watch: Annotated[float | None, Query(ge=0)] = None,
) -> Response:
    url, delay = live_url(request, watch)
    context = page_context(
        c, request, view=await mailboxes.in_scope(rt, c.scope), live_url=url,
        live_stream=stream_url(), delay=delay,
    )  # fmt: skip
    return page_or_live(request, "console/mailboxes.html", context)
