"""Interface strings translated once, when a template is compiled for a locale.

Every environment is one locale's (ui/render.py), so `{{ _("Reply") }}` — a translation of a
fixed string, with no parameters — has one answer per environment. This extension puts that
answer into the compiled template as text, instead of a gettext call per render (a ticket's
page had ~48 of them). The text is what the call renders: newstyle gettext under autoescape
takes the translation as markup (never escaped) and formats it with no variables (`%%` → `%`).

Folded only when the catalog knows the string (or is the source language): a missing
translation stays a call, so the catalog still records it as `missing` at render time and the
language tests that render every page still see it.
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2.ext import Extension
from jinja2.lexer import Token, TokenStream
from markupsafe import Markup

from ui import i18n

# `{{ _("literal") }}` as the lexer gives it (the string token in the middle).
_SHAPE = ("variable_begin", "name", "lparen", "string", "rparen", "variable_end")


class FoldTranslations(Extension):
    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        catalog = i18n.catalog(str(self.environment.globals.get("locale", i18n.DEFAULT)))
        held: list[Token] = []
        for token in stream:
            held.append(token)
            if not _may_become(held):
                yield from held[:-1] if _may_become(held[-1:]) else held
                held = held[-1:] if _may_become(held[-1:]) else []
                continue
            if len(held) == len(_SHAPE):
                text = _folded(catalog, str(held[3].value))
                yield from [Token(held[0].lineno, "data", text)] if text is not None else held
                held = []
        yield from held


def _may_become(tokens: list[Token]) -> bool:
    """`tokens` are the start of `{{ _("…") }}`."""
    for token, kind in zip(tokens, _SHAPE, strict=False):
        if token.type != kind or (kind == "name" and token.value != "_"):
            return False
    return len(tokens) <= len(_SHAPE)


def _folded(catalog: i18n.Catalog, message: str) -> str | None:
    """What `_(message)` renders, or None when it must stay a call (not translated here, or
    not a plain text: a `%(name)s` it would have to be given)."""
    if not catalog.source and message not in catalog.messages:
        return None
    try:
        return str(Markup(catalog.gettext(message)) % {})
    except (KeyError, ValueError, TypeError):
        return None
