"""The polling schedule of a task row (DESIGN.md §6): 1, 1, 2, 2, 5, 5, 5, then every 10 s.

The server computes the next delay from how long the row has been watched (`since`, a server
timestamp carried in the row's URL), so a reload or a new tab starts the schedule again and a
row stops polling by itself after ten minutes of watching.
"""

from __future__ import annotations

from itertools import accumulate

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
