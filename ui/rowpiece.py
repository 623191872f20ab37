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

Bounded per process (MAX_PIECES entries, then cleared: a forgotten piece is made again). An entry
holds its row object, so an `id` in a key cannot stand for another object while it lives.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from markupsafe import Markup

from desk.core.models import TaskKind
from desk.reads.tasks import TaskRow
from ui import render, rowcache, taskview
from ui.taskview import TaskView

MAX_PIECES = 4096

_pieces: dict[tuple[Any, ...], tuple[TaskRow, TaskView, str]] = {}


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
    key = (id(task), locale, tz, cancel, oob, *seen[1:], title_shown)
    hit = _pieces.get(key)
    if hit is None or hit[0] is not task:
        view = taskview.build_from(task, seen, title)
        macro = render.row_macro(locale)
        hit = (task, view, rowcache.sinceless(locale, macro, view, tz, cancel, oob))
        if len(_pieces) >= MAX_PIECES:
            _pieces.clear()
        _pieces[key] = hit
    _, view, html = hit
    return view, rowcache.watched_since(html, view.poll_delay, seen.since)


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
