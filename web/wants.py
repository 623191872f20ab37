"""What a request wants back, decided once for every answer that has a choice: HTML (a browser,
or htmx) or data (JSON, text); and, for HTML, a fragment (htmx) or the whole page.

The in-flight refusal (web/overload.py), the error answers (web/errors.py) and the pages
(ui.render.is_htmx) all ask here, so a request gets the same kind of answer whichever of them
answers it. `headers` is anything with `get(name)` over lower-case names: a starlette
`Headers` (a request's, or one read off an ASGI scope).
"""

from __future__ import annotations

from collections.abc import Mapping


def html(headers: Mapping[str, str]) -> bool:
    """htmx always wants HTML; anything else when its `Accept` names text/html and not
    application/json (an API client that takes both gets its data)."""
    if headers.get("hx-request") == "true":
        return True
    accept = headers.get("accept", "")
    return "text/html" in accept and "application/json" not in accept


def fragment(headers: Mapping[str, str]) -> bool:
    """An htmx call that wants a fragment. Restoring history (back button, cache miss) asks for
    the whole page, so it gets one."""
    return (
        headers.get("hx-request") == "true" and headers.get("hx-history-restore-request") != "true"
    )
