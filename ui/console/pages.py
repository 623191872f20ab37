"""Helpers the console's routes share: the template context (status words, tones, action
names), the live block's URL and its stream's, and rendering a page or its live block."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse

from desk.core.models import BackgroundTask
from desk.ledger import rules as task_rules
from ui.console.route import Console, live_delay
from ui.render import is_htmx, render
from ui.taskview import KIND_LABELS, TONE

ACTION_LABELS = {
    "retry": "Retried a task",
    "cancel": "Cancelled a task",
    "group_retry": "Retried a group of failures",
    "group_cancel": "Cancelled a group of failures",
    "lane_pause": "Paused a lane",
    "lane_resume": "Resumed a lane",
    "operator_add": "Granted the operator role",
    "operator_remove": "Removed the operator role",
    "schedule_pause": "Paused a scheduled export",
    "team_create": "Created a team",
    "invite": "Invited someone",
    "invitation_revoke": "Withdrew an invitation",
    "invitation_accept": "Accepted an invitation",
    "member_add": "Added a member",
    "member_role": "Changed a member's role",
    "member_remove": "Removed a member",
    "password_reset_request": "Asked for a password reset",
    "password_reset": "Reset a password",
}
EVENT_LABELS = {
    "accepted": "Accepted",
    "sent": "Sent to the queue",
    "claimed": "Claimed by a worker",
    "progress": "Progress",
    "error": "Error; will retry",
    "released": "Handed back by a stopping worker",
    "rescued": "Rescued: its worker stopped responding",
    "rearmed": "Re-armed",
    "retried": "Retried",
    "cancel_requested": "Asked to stop",
    "cancelled": "Cancelled",
    "skipped": "Skipped",
    "completed": "Completed",
    "failed": "Failed",
}


def page_context(console: Console, request: Request, **extra: Any) -> dict[str, Any]:
    now = request.app.state.runtime.clock()

    def label(t: BackgroundTask) -> str:
        return task_rules.status_label(t, now)

    return console.context(
        now=now,
        label=label,
        tone=lambda t: TONE.get(label(t), "muted"),
        kind_label=lambda k: KIND_LABELS.get(k, k.title()),
        action_labels=ACTION_LABELS,
        event_labels=EVENT_LABELS,
        **extra,
    )


def live_url(
    request: Request, watch: float | None, params: dict[str, str] | None = None
) -> tuple[str, int]:
    """The live block's URL (the page's own path and filters, plus `watch`: since when it has
    been watched) and the delay of its timed poll (a page whose ops.js does not run)."""
    watch, delay = live_delay(watch)
    query = {k: v for k, v in (params or {}).items() if v}
    query["watch"] = f"{watch:.3f}"
    return f"{request.url.path}?{urlencode(query)}", delay


def stream_url(**params: int | str | None) -> str:
    """The address of the event stream that says when a live block changed (ui.console.live):
    the whole scope, or one task, team or kind."""
    query = {k: str(v) for k, v in params.items() if v}
    return f"/ops/live?{urlencode(query)}" if query else "/ops/live"


def page_or_live(
    request: Request, name: str, context: dict[str, Any], *, status: int = 200
) -> HTMLResponse:
    """The whole page, or its `live` block for htmx (a refresh)."""
    return render(request, name, context, block="live" if is_htmx(request) else None, status=status)
