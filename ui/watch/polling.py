"""The polling schedule of a task row (docs/architecture.md, "Polling"): 1, 1, 2, 2, 5, 5, 5,
then every 10 s, and the page watcher's tick built from it.

The server computes the next delay from how long the row has been watched (`since`, a server
timestamp carried in the row's URL), so a reload or a new tab starts the schedule again and a
row stops polling by itself after ten minutes of watching.
"""

from __future__ import annotations

import math
import zlib
from bisect import bisect_right
from datetime import datetime
from itertools import accumulate

from desk.core.clock import micros

DELAYS = (1, 1, 2, 2, 5, 5, 5)
STEADY = 10
STOP_AFTER = 600  # seconds of watching; then a "Refresh" control replaces auto-polling
# Watch age at which each delay of DELAYS starts: 0, 1, 2, 4, 6, 11, 16 (and STEADY from 21).
_STARTS = (0, *accumulate(DELAYS))


def next_delay(age: float) -> int | None:
    """Seconds until the row should poll again, or None once it has been watched too long.

    Each poll happens no earlier than its nominal time, so ages only run late and the sequence
    of delays a row sees is exactly the schedule (a slow answer may skip a step, never repeat one).
    """
    if age >= STOP_AFTER:
        return None
    if age >= _STARTS[-1]:
        return STEADY
    for start, delay in reversed(list(zip(_STARTS, DELAYS, strict=False))):
        if age >= start:
            return delay
    return DELAYS[0]  # a `since` in the future: treat the row as brand new


def watched(since: float | None, now: float) -> tuple[float, int | None]:
    """(since, seconds until the next poll or None) of a block that polls by itself on the rows'
    schedule (the import form's controls): `since` comes back in its URL, and a reload, or one
    from the future, starts the schedule again. `since` is kept to the millisecond the URL
    carries, rounded down: ages only ever run late, so no step of the schedule repeats."""
    start = math.floor(1000 * (now if since is None else min(since, now))) / 1000
    return start, next_delay(now - start)


# One watcher per page (ui/watch/watcher.py, ui/static/ui.js) asks for everything the page shows
# in one request: at the earliest schedule point of its unfinished rows, and at least every IDLE
# seconds so a task started elsewhere shows within that; a hidden tab asks every HIDDEN seconds.
IDLE = 5.0
HIDDEN = 30.0
_MIN_WAIT = 0.2  # never re-ask sooner, even for a row rendered a hair before its point
# A page asks at most this often. A page that follows many young rows (a busy team's list) has
# a schedule point every few tenths of a second — its rows' points, each on its own clock — and
# asked 3 to 4 times a second in the load drill; a row due sooner than this waits for it (under
# a second late: the schedule's shortest step is 1 s), and one tick checks them all.
PAGE_MIN_GAP = 0.8


def due_in(age: float) -> float | None:
    """Seconds until the row's next schedule point after `age` (None once past STOP_AFTER).

    Unlike `next_delay`, this counts from the schedule's own points (0, 1, 2, 4, 6, 11, 16,
    21, 31, …): a row checked early because another row was due keeps its schedule.
    """
    if age >= STOP_AFTER:
        return None
    if age < 0:
        return float(DELAYS[0])
    # The first point after `age` (bisect: called for every watched row of every tick).
    at = bisect_right(_STARTS, age)
    if at < len(_STARTS):
        point: float = _STARTS[at]
    else:
        point = _STARTS[-1] + STEADY * (int((age - _STARTS[-1]) // STEADY) + 1)
    return max(_MIN_WAIT, min(point, STOP_AFTER) - age)


def tick_in(ages: list[float]) -> float:
    """Seconds until the page's watcher should ask again: the earliest row due (but not sooner
    than PAGE_MIN_GAP), or IDLE."""
    dues = [d for d in map(due_in, ages) if d is not None]
    return max(PAGE_MIN_GAP, min([IDLE, *dues]))


def version(updated_us: int, label: str, paused: bool) -> str:
    """What a row shows, as a short token: the page sends it back and gets the row again only
    when it changed (a status, progress or lease change moves `updated_at`; the label covers
    changes that time alone makes, such as Scheduled → Queued or Worker lost)."""
    return format(zlib.crc32(f"{updated_us}|{label}|{int(paused)}".encode()), "08x")


def row_version(updated_at: datetime, label: str, paused: bool) -> str:
    """`version` of a row as rendered (the template's side of the same token)."""
    return version(micros(updated_at), label, paused)
