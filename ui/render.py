"""Rendering: one Jinja2 environment per locale, whole pages or one named block of them.

A page template names its fragments as blocks; an htmx request (the `HX-Request` header) gets
only the block the route asks for, with `Vary: HX-Request` so caches keep the two apart.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import cache, partial
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, Template, select_autoescape

from ui import i18n, rowcache, texts
from ui.folding import FoldTranslations
from ui.watch import polling
from web import wants

TEMPLATES = Path(__file__).parent / "templates"


def is_htmx(request: Request) -> bool:
    """An htmx call that wants a fragment (web/wants.py decides it for every answer)."""
    return wants.fragment(request.headers)


def _local(value: datetime | None, tz: ZoneInfo | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    if value is None:
        return ""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(tz or UTC).strftime(fmt)


def _enum_label(value: str | None) -> str:
    """OPEN → Open (then translated in the template)."""
    return (value or "").replace("_", " ").title()


@cache
def environment(locale: str) -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]),
        # FoldTranslations after i18n: a fixed string's translation compiled in (ui/folding.py).
        extensions=["jinja2.ext.i18n", FoldTranslations],
        trim_blocks=True,
        lstrip_blocks=True,
        # Templates ship with the code: no stat of every file on every render to spot an edit
        # (a changed template needs a restart, as a changed module does).
        auto_reload=False,
    )
    catalog = i18n.catalog(locale)
    env.install_gettext_translations(catalog, newstyle=True)  # type: ignore[attr-defined]
    env.filters["dt"] = catalog.domain_text
    env.filters["local"] = _local
    env.filters["label"] = _enum_label
    env.filters["tojson_attr"] = lambda v: json.dumps(v, separators=(",", ":"))
    env.filters["n"] = partial(texts.number, locale)
    env.globals["say"] = partial(texts.say, catalog, locale)
    env.globals["error_title"] = partial(texts.error_title, catalog)
    env.globals["describe_export"] = partial(texts.describe_export, catalog, locale)
    env.globals["new_key"] = lambda: uuid.uuid4().hex
    env.globals["row_version"] = polling.row_version
    env.globals["html_lang"] = i18n.HTML_LANG.get(locale, "en")
    env.globals["locale"] = locale
    env.globals["row_html"] = partial(_row_html, locale)
    return env


def row_macro(locale: str) -> Any:
    """The `_rows.html` task row macro of this locale."""
    return _template(locale, "_rows.html").module.task_row  # type: ignore[attr-defined]


def _row_html(locale: str, view: Any, tz: ZoneInfo, cancel: bool = True, oob: bool = False) -> Any:
    """A task row (the `_rows.html` macro) through the per-process render cache (ui.rowcache)."""
    return rowcache.row_html(locale, row_macro(locale), view, tz, cancel, oob)


@cache
def _template(locale: str, name: str) -> Template:
    """Compiled once per locale and name (Jinja's own cache adds a lock and an LRU per call)."""
    return environment(locale).get_template(name)


def row_fragment(locale: str, view: Any, tz: ZoneInfo) -> str:
    """What `tasks.html`'s `row` block renders for an unfinished row (the polled answer): the
    row itself — without a template context per poll. A finished row also announces itself:
    that goes through the block."""
    return f"{_row_html(locale, view, tz)}\n"


def render_html(
    locale: str, name: str, context: Mapping[str, Any], block: str | None = None
) -> str:
    template = _template(locale, name)
    if block is None:
        return template.render(context)
    return "".join(template.blocks[block](template.new_context(dict(context))))


def render(
    request: Request,
    name: str,
    context: Mapping[str, Any],
    *,
    block: str | None = None,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    locale: str | None = None,
) -> HTMLResponse:
    """The page, or `block` of it for an htmx request (pass block only for htmx requests)."""
    viewer = context.get("v")
    locale = (
        locale
        or getattr(viewer, "locale", None)
        or i18n.pick(None, request.headers.get("accept-language"))
    )
    ctx = {"request": request, **context}
    response = HTMLResponse(render_html(locale, name, ctx, block), status_code=status)
    response.headers["Vary"] = "HX-Request"
    response.headers["Cache-Control"] = "no-store"
    for key, value in (headers or {}).items():
        response.headers[key] = value
    return response


def fragment(html: str, status: int = 200) -> HTMLResponse:
    """An htmx fragment rendered already, with the headers `render` gives one."""
    response = HTMLResponse(html, status_code=status)
    response.headers["Vary"] = "HX-Request"  # as `render`, in the same order
    response.headers["Cache-Control"] = "no-store"
    return response


# What `fragment` answers with besides the length, as starlette writes them (its own order).
_FRAGMENT_HEADERS = [
    (b"content-type", b"text/html; charset=utf-8"),
    (b"vary", b"HX-Request"),
    (b"cache-control", b"no-store"),
]


def fragment_raw(html: str) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """`fragment(html)`'s body and headers without building a Response (the polled row,
    ui.tasks_routes.polled_row); tests/api/test_edge.py holds the two to the same bytes."""
    body = html.encode("utf-8")
    return body, [(b"content-length", str(len(body)).encode()), *_FRAGMENT_HEADERS]


def fragment_or_page(
    request: Request, name: str, context: Mapping[str, Any], block: str, **kw: Any
) -> HTMLResponse:
    """The usual answer of a page route: `block` for htmx, the whole page otherwise."""
    return render(request, name, context, block=block if is_htmx(request) else None, **kw)
