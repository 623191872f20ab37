"""A task row's HTML, rendered once per distinct look and reused (docs/architecture.md, "Polling").

Every new task is new to every page that shows its list, and a polled row is rendered again
on every poll: in the load drill the same row was rendered ~200 times. The markup of a row is a
function of what it shows — the fields the macro (`_rows.html`) reads, the view's computed
words and rights, the locale, the time zone and the call's `cancel`/`oob` — so those are the key
(nothing else: two tasks, or two viewers with different rights, never share an entry). The
fields are read off the macro's source when this module is imported, not listed by hand. The one
per-viewer value, when the row is watched (`data-since`), is put in after the lookup.

Bounded per process (an LRU of MAX_ENTRIES rows); nothing to invalidate, since a change to
anything shown is a different key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import fields, replace
from operator import attrgetter
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import Environment, nodes
from markupsafe import Markup

from desk.core.rows import TASK_COLUMNS, TaskRow
from ui.taskview import TaskView

MAX_ENTRIES = 4096
ROWS_TEMPLATE = Path(__file__).parent / "templates" / "_rows.html"
SINCE_MARK = 'data-since="0.000"'  # the row rendered with since 0, then given its own


def _read_by_macro(name: str) -> set[str]:
    """The attributes the macro reads of `name` (`r`: the TaskView, `t`: its task)."""
    tree = Environment(extensions=["jinja2.ext.i18n"]).parse(ROWS_TEMPLATE.read_text())
    return {
        n.attr
        for n in tree.find_all(nodes.Getattr)
        if isinstance(n.node, nodes.Name) and n.node.name == name
    }


def _key_fields() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """What the key is made of, read off the macro: the task's plain fields (and its id, which
    `r.id` shows), the task's dicts, and the view's fields, each in its type's order."""
    of_task = _read_by_macro("t") | {"id"}
    unknown = of_task - set(TASK_COLUMNS)
    if unknown:  # the macro reads something a TaskRow does not carry
        raise TypeError(f"_rows.html reads t.{sorted(unknown)}: not TaskRow fields")
    maps = {f.name for f in fields(TaskRow) if str(f.type).startswith("dict")}
    plain = tuple(c for c in TASK_COLUMNS if c in of_task - maps)
    dicts = tuple(c for c in TASK_COLUMNS if c in of_task & maps)
    # Of the view: its own fields (its properties are made of these and the task's); `since`
    # is put in after the lookup, and `task` is keyed above.
    of_view = _read_by_macro("r")
    shown = tuple(f.name for f in fields(TaskView) if f.name in of_view - {"task", "since"})
    return plain, dicts, shown


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """`attrgetter` (one C call), always answering a tuple."""
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda o: (one(o),)
    return attrgetter(*names)


TASK_FIELDS, TASK_MAPS, VIEW_FIELDS = _key_fields()
_task_key, _task_maps, _view_key = map(_getter, (TASK_FIELDS, TASK_MAPS, VIEW_FIELDS))

_cache: OrderedDict[tuple[Any, ...], str] = OrderedDict()


def _key(view: TaskView, tz: ZoneInfo, cancel: bool, oob: bool) -> tuple[Any, ...]:
    t = view.task
    # Dicts are not hashable: their repr, in the stored order (the same task, the same order).
    maps = tuple(map(repr, _task_maps(t)))
    return (str(tz), cancel, oob, _task_key(t), maps, _view_key(view))


def row_html(
    locale: str,
    render: Callable[..., Any],
    view: TaskView,
    tz: ZoneInfo,
    cancel: bool = True,
    oob: bool = False,
) -> Markup:
    """`render(view, tz, cancel, oob)` (the macro) for this row, from the cache when it has it."""
    return watched_since(
        sinceless(locale, render, view, tz, cancel, oob), view.poll_delay, view.since
    )


def sinceless(
    locale: str, render: Callable[..., Any], view: TaskView, tz: ZoneInfo, cancel: bool, oob: bool
) -> str:
    """The row as cached: watched since 0 (`watched_since` gives it the viewer's own)."""
    key = (locale, *_key(view, tz, cancel, oob))
    html = _cache.get(key)
    if html is None:
        html = str(render(replace(view, since=0.0), tz, cancel, oob))
        _cache[key] = html
        if len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return html


def watched_since(html: str, poll_delay: int | None, since: float) -> Markup:
    """A cached row given its viewer's `since` when it is watched (it polls)."""
    if poll_delay:
        html = html.replace(SINCE_MARK, f'data-since="{since:.3f}"', 1)
    return Markup(html)  # rendered by the autoescaping macro


def clear() -> None:
    _cache.clear()
