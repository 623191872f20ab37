"""A task row's HTML, rendered once per distinct look and reused (issue 11).

Every new task is new to every page that shows its list, and a polled row is rendered again
on every poll: in the load drill the same row was rendered ~200 times. The markup of a row is a
function of what it shows — the fields the macro (`_rows.html`) reads, the view's computed
words and rights, the locale, the time zone and the call's `cancel`/`oob` — so those are the key
(nothing else: two tasks, or two viewers with different rights, never share an entry). The one
per-viewer value, when the row is watched (`data-since`), is put in after the lookup.

Bounded per process (an LRU of MAX_ENTRIES rows); nothing to invalidate, since a change to
anything shown is a different key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from zoneinfo import ZoneInfo

from markupsafe import Markup

from ui.taskview import TaskView

MAX_ENTRIES = 4096
# What the macro reads of the task (ui/templates/_rows.html): keep in step with it.
TASK_FIELDS = (
    "id",
    "kind",
    "status",
    "updated_at",
    "note",
    "run_at",
    "progress_current",
    "progress_total",
    "result_summary",
    "summary_key",
    "last_error",
    "attempts",
    "max_attempts",
    "created_at",
)
SINCE_MARK = 'data-since="0.000"'  # the row rendered with since 0, then given its own

_cache: OrderedDict[tuple[Any, ...], str] = OrderedDict()


def _key(view: TaskView, tz: ZoneInfo, cancel: bool, oob: bool) -> tuple[Any, ...]:
    t = view.task
    task = tuple(getattr(t, name) for name in TASK_FIELDS)
    # Dicts are not hashable: their repr, in the stored order (the same task, the same order).
    maps = (repr(t.filters), repr(t.summary_params))
    shown = (
        view.label,
        view.kind,
        view.covers,
        view.covers_link,
        view.poll_delay,
        view.stale,
        view.progress_pct,
        view.eta_seconds,
        view.can_download,
        view.can_cancel,
        view.can_retry,
        view.mode,
        view.counts,
        view.can_report,
        view.paused,
    )
    return (str(tz), cancel, oob, task, maps, shown)


def row_html(
    locale: str,
    render: Callable[..., Any],
    view: TaskView,
    tz: ZoneInfo,
    cancel: bool = True,
    oob: bool = False,
) -> Markup:
    """`render(view, tz, cancel, oob)` (the macro) for this row, from the cache when it has it."""
    key = (locale, *_key(view, tz, cancel, oob))
    html = _cache.get(key)
    if html is None:
        html = str(render(replace(view, since=0.0), tz, cancel, oob))
        _cache[key] = html
        if len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    if view.poll_delay:
        html = html.replace(SINCE_MARK, f'data-since="{view.since:.3f}"', 1)
    return Markup(html)  # rendered by the autoescaping macro


def clear() -> None:
    _cache.clear()
