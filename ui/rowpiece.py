"""A task row in the page watcher's answer, made once per row object and look, then shared by every
tick that shows it (docs/architecture.md, "Polling").

On a busy team every page shows the same rows, and the memory of the change feed hands each tick
the same `TaskRow` object for a row at one version (desk.reads.memory `Whole`, desk/reads/recall.py).
Building the row's view (ui.taskview) and finding its markup (ui.rowcache, keyed on every field
the macro shows) came to ~25 µs a row: in the load drill, every page re-shows about twenty rows a
tick, so the same work was done hundreds of times a second for the same rows.

Here the view and the markup are kept per row *object* and what the time and the viewer add to
it: the label (it turns by time), the poll delay (from how long this page has watched it), the
ETA, whether the viewer may download it, the paused lane, the reminder's ticket title, the locale,
the time zone and the call's `cancel`/`oob`; `build` reads nothing else. A row read from the
database is a new object: it misses here and is built as before (ui.rowcache still spares it the
rendering). The one per-viewer value of the markup, `data-since`, is put in after the lookup.

Kept per process in a bounded memo by row object (desk/core/memo.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from zoneinfo import ZoneInfo

from markupsafe import Markup

from desk.core.memo import ByObject
from desk.core.models import TaskKind
from desk.reads.tasks import TaskRow
from ui import render, rowcache, taskview
from ui.taskview import TaskView

_pieces: ByObject[tuple[TaskView, str]] = ByObject(4096)


def piece(
    locale: str,
    tz: ZoneInfo,
    task: TaskRow,
    *,
    viewer_id: int,
    now: datetime,
    since: float | None,
    title: str | None,
    paused_lanes: frozenset[str],
    cancel: bool,
    oob: bool,
) -> tuple[TaskView, Markup]:
    """The row as `taskview.build(...)` and the `_rows.html` macro would make it, and its view.
    The view is shared by every page that shows the row: its `since` is the first page's; the
    markup carries each viewer's own."""
    seen = taskview.look(task, viewer_id=viewer_id, now=now, since=since, paused_lanes=paused_lanes)
    # Everything of the look but `since`, which the markup gets after the lookup.
    title_shown = title if task.kind == TaskKind.REMINDER else None
    key = (locale, tz, cancel, oob, *seen[1:], title_shown)
    view, html = _pieces.get(task, key, lambda: _made(locale, tz, task, seen, title, cancel, oob))
    return view, rowcache.watched_since(html, view.poll_delay, seen.since)


def _made(
    locale: str,
    tz: ZoneInfo,
    task: TaskRow,
    seen: taskview.Look,
    title: str | None,
    cancel: bool,
    oob: bool,
) -> tuple[TaskView, str]:
    view = taskview.build_from(task, seen, title)
    macro = render.row_macro(locale)
    return view, rowcache.sinceless(locale, macro, view, tz, cancel, oob)


def listed(
    locale: str,
    tz: ZoneInfo,
    tasks: Iterable[TaskRow],
    *,
    viewer_id: int,
    now: datetime,
    titles: Mapping[int, str],
    paused_lanes: frozenset[str],
) -> Markup:
    """A list's rows, joined: watched from now on, with their cancel buttons, in place."""
    return Markup(
        "".join(
            [
                piece(
                    locale,
                    tz,
                    t,
                    viewer_id=viewer_id,
                    now=now,
                    since=None,
                    title=titles.get(t.ticket_id or 0),
                    paused_lanes=paused_lanes,
                    cancel=True,
                    oob=False,
                )[1]
                for t in tasks
            ]
        )
    )


def clear() -> None:
    _pieces.clear()
