"""What is observed of every HTTP request: its request id, its duration metric, its log line.

The id is the caller's `X-Request-ID` when it is sane (1 to 64 of `A-Z a-z 0-9 . _ : -`), else a
new one; it is bound for logging (every line of the request carries it), kept on
`request.state.request_id` (error pages show it) and returned in the `X-Request-ID` header.
The duration is recorded by route template (`/tasks/{task_id}/download`), never by raw path, so
the metric's labels stay few; a path that matched no route counts as `<unmatched>`.

web/edge.py does it, in the one pass every request gets; these are its rules.
"""

from __future__ import annotations

import re

from starlette.types import Scope

SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
UNMATCHED = "<unmatched>"


def route_template(scope: Scope) -> str:
    """The path pattern of the route that matched (a mount's prefix for static files)."""
    route = scope.get("route")
    path = getattr(route, "path", None) or getattr(route, "path_format", None)
    if not path:
        return UNMATCHED
    return str(path)
