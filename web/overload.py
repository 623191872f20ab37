"""Overload is refused at once: a bound on the HTTP requests one web process serves at a time.

Beyond the bound, a new request is answered 503 with `Retry-After` before any work is done for
it: a browser's navigation gets a small page, fragments and API clients a short text (htmx rows
back off and retry by themselves), `/graphql` the GraphQL error shape with
`extensions.code = "OVERLOADED"` (which is which: web/wants.py, as for every answer). Without
the bound, a busy process takes every request and serves all of them slowly (status reads once
waited 29 s at the median); with it, the ones it takes stay fast and the others learn at once to
come back.

It is the first thing web/edge.py does: a refusal skips the request log, tracing and the rest of the
stack (under a flood of clients that do not back off, refusals are most of the work; they are
counted in `taskdesk_http_overloaded_total` instead). Requests that must answer under load pass
without counting: `/health` (liveness), `/metrics` and static files. Every request also gets its arrival time (`request.state.arrived_at`, from
the runtime's injected clock): a mutation is judged by when it arrived, not by when the server
got to it (a reminder "in 10 s" stays in the future however long it waited).

The bound adapts (`Bound`): WEB_MAX_IN_FLIGHT is its ceiling, and while answers start later
than WEB_TARGET_LATENCY_MS it shrinks, down to WEB_MIN_IN_FLIGHT. A fixed count cannot bound the
wait: on a saturated process every request in flight shares the CPU, so a request waits about
(requests in flight) x (CPU per request), and that product, not the count, is what a person feels
(a load drill: 48 in flight on a box also running PostgreSQL and two workers gave p99 ~700 ms,
24 gave ~310 ms serving as many). So the bound follows the wait it causes, judged by windows of
answers (at least `WINDOW` answers and one target interval: the answers already in flight were
admitted under the old bound): a window with more than 5 % of its answers late cuts it by a
tenth, any other grows it by about one per `bound` answers in time. One late answer in twenty
does not cut it: the bound holds the wait's tail (its 95th percentile) near the target, not
every answer — cutting on any single late one (a collector pass, a burst of ticks) kept it at
its floor in the load drill and refused most polls of a box not even busy. Only
the answers the bound governs count: polls (GET, HEAD). A mutation's time is mostly its own work
(its lock, its insert, its commit), not the queue's; counted, every click that took 70 ms cut the
bound for the polls (in the load drill: 20 of them a second).
What a person asked for (any method but GET and HEAD: a click, a mutation) is refused only at
the ceiling: the adapted bound turns away polls first, which come back by themselves.
"""

from __future__ import annotations

import json

from starlette.datastructures import Headers
from starlette.types import Scope, Send

from web import wants
from web.headers import COMMON

# schema.errors.OVERLOADED, not imported: api.app must stay cheap to import (no GraphQL).
OVERLOADED = "OVERLOADED"
RETRY_AFTER_SECONDS = 1  # short: the refusal is about this instant, not an outage
MESSAGE = "The server is busy right now; try again in a second."
EXEMPT = ("/health", "/metrics", "/static/")
_GRAPHQL_BODY = json.dumps(
    {"errors": [{"message": MESSAGE, "extensions": {"code": OVERLOADED}}]},
    separators=(",", ":"),
).encode()
_PAGE_BODY = (
    '<!doctype html><html><head><meta charset="utf-8"><title>Busy</title></head>'
    f"<body><p>{MESSAGE}</p></body></html>"
).encode()


class Bound:
    """The in-flight bound, adapted to how soon answers start (see the module docstring).

    `seen(seconds, now)` takes one answer's time from arrival to its first byte and the
    monotonic time it was seen; `admits(in_flight, urgent)` says whether one more request may
    start (an urgent one, up to the ceiling).
    Time is passed in, so tests drive it without a clock."""

    DECREASE = 0.9
    LATE_SHARE = 0.05  # more answers late than this in a window cut the bound
    WINDOW = 20  # the answers a window holds at least (and it lasts one target at least)

    def __init__(
        self, ceiling: int, floor: int, target_seconds: float, window: int = WINDOW
    ) -> None:
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.target = target_seconds
        self.window = window
        self.limit = float(ceiling)
        self._late = 0
        self._count = 0
        self._since = float("-inf")

    def admits(self, in_flight: int, urgent: bool = False) -> bool:
        return in_flight < (self.ceiling if urgent else int(self.limit))

    def seen(self, seconds: float, now: float) -> None:
        self._count += 1
        self._late += seconds > self.target
        if self._count < self.window or now - self._since < self.target:
            return
        if self._late > self.LATE_SHARE * self._count:
            self.limit = max(float(self.floor), self.limit * self.DECREASE)
        elif self.limit < self.ceiling:
            # About one more per `limit` answers in time, as many as the window held.
            self.limit = min(float(self.ceiling), self.limit + self._count / self.limit)
        self._late = self._count = 0
        self._since = now


def urgent(scope: Scope) -> bool:
    """Asked for by a person (a form post, a mutation), not a poll: refused last."""
    return scope["method"] not in ("GET", "HEAD")


def exempt(path: str) -> bool:
    return path in EXEMPT[:2] or path.startswith(EXEMPT[2])


def _refusal(scope: Scope) -> tuple[bytes, bytes]:
    """GraphQL's error shape on /graphql; a small page for whoever wants a whole HTML page
    (web/wants.py); the message as text otherwise (an htmx row shows it and polls again)."""
    if scope.get("path") == "/graphql":
        return _GRAPHQL_BODY, b"application/json"
    headers = Headers(scope=scope)
    if wants.html(headers) and not wants.fragment(headers):
        return _PAGE_BODY, b"text/html; charset=utf-8"
    return MESSAGE.encode(), b"text/plain; charset=utf-8"


async def refuse(scope: Scope, send: Send) -> None:
    body, media = _refusal(scope)
    headers = [
        (b"content-type", media),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
        (b"cache-control", b"no-store"),
        *COMMON,
        (b"content-security-policy", b"default-src 'none'"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
