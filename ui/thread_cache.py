"""A thread's messages as HTML, remembered per process: the `message` macro of `_thread.html` is
a pure function of what `key` names, so its answer for the same inputs is the same markup.

Rendering 50 messages through Jinja's macros was most of the ticket page's time (bench
conversation-page). A message never changes once posted but for its redaction, its e-mails'
delivery and the names beside it — and every one of those is in the key, with the reader's side
of it (staff, admin, language, time zone, CSRF token). So nothing here can ever be stale or
someone else's: a changed input is another key, and an entry is only ever found by a reader
whose every input is the same (the CSRF token makes entries one session's). What a reader may
see is decided before this, by the read (`desk.reads`): a note never reaches a customer's
thread, so it is never looked up for one. No invalidation: the least recently used entries go.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

from markupsafe import Markup

SIZE = 4096  # entries (≈ 1 KiB of HTML each)

_html: OrderedDict[Hashable, Markup] = OrderedDict()


def remembered(key: Hashable, render: Callable[[], str]) -> Markup:
    """The markup `render()` makes for `key`, rendered the first time only."""
    found = _html.get(key)
    if found is not None:
        _html.move_to_end(key)
        return found
    html = Markup(render())
    _html[key] = html
    if len(_html) > SIZE:
        _html.popitem(last=False)
    return html


def clear() -> None:
    _html.clear()
