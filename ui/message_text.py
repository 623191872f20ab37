"""A message's plain text as safe HTML (docs/architecture.md, "Conversation": plain text with
safe formatting). Pure: text in, markup out, nothing else read.

Everything is HTML-escaped; the only markup made is ours: `<br>` for line breaks, `<a>` for
http(s) URLs (never another scheme, so no `javascript:`), and `<details>` around quoted text —
runs of lines starting with `>`, and an e-mail's tail from its "On … wrote:" line on. Characters
that could hide or reorder what a reader sees are dropped (the direction overrides and
isolates) or shown as U+FFFD (controls, NUL, lone surrogates), so a message cannot dress itself
up as something else or spill into the page around it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from markupsafe import Markup, escape

# Embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069): a message must not turn
# the text after it around ("\u202eexe.txt"). The plain marks U+200E/U+200F change nothing
# outside their own run and stay.
_DIRECTION = re.compile("[\u202a-\u202e\u2066-\u2069]")
# C0 controls but tab and line feed, DEL, C1 controls, lone surrogates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# An http(s) URL: no spaces, quotes, angle brackets or controls (the text around it is text).
_URL = re.compile(r"""(?<![\w@/])https?://[^\s<>"'`\x00-\x1f\x7f]+""", re.IGNORECASE)
_TRAILING = ".,;:!?'\"\u00bb\u201d\u2019)]}"
_PAIRS = {")": "(", "]": "[", "}": "{"}
# The line an e-mail client puts above the message it quotes.
_WROTE = re.compile(
    r"^\s*(On\s.{1,300}\swrote:|在.{1,300}写道[:\uff1a]|\d{4}.{1,300}写道[:\uff1a])\s*$",
    re.IGNORECASE,
)
MAX_URL = 2000
LINK_REL = "noopener noreferrer nofollow"


def clean(text: str) -> str:
    """The text as shown: line breaks made `\\n`, direction controls dropped, other controls
    (NUL included) and lone surrogates made U+FFFD."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\ufffd", _DIRECTION.sub("", text))


def _trim(url: str) -> str:
    """A URL without the punctuation that ends the sentence around it (a closing bracket stays
    when the URL opened it: `https://en.wikipedia.org/wiki/Foo_(bar)`)."""
    while url and url[-1] in _TRAILING:
        last = url[-1]
        if last in _PAIRS and url.count(_PAIRS[last]) >= url.count(last):
            break
        url = url[:-1]
    return url


def linkify(line: str) -> Markup:
    """One line, escaped, with its http(s) URLs as links."""
    out: list[str] = []
    at = 0
    for found in _URL.finditer(line):
        url = _trim(found.group())
        # No host left once the sentence's punctuation is off ("https://."): text, not a link.
        if not url.partition("://")[2] or len(url) > MAX_URL:
            continue
        start, end = found.start(), found.start() + len(url)
        out.append(str(escape(line[at:start])))
        href = escape(url)
        out.append(f'<a href="{href}" rel="{LINK_REL}" target="_blank">{href}</a>')
        at = end
    out.append(str(escape(line[at:])))
    return Markup("".join(out))


def _lines(lines: list[str]) -> str:
    return "<br>\n".join(linkify(x) for x in lines)


def _blocks(lines: list[str]) -> Iterator[tuple[bool, list[str]]]:
    """(quoted?, lines) in order: runs of `>` lines, and an e-mail tail from "On … wrote:"."""
    run: list[str] = []
    quoted = False
    for i, line in enumerate(lines):
        if _WROTE.match(line) and any(x.strip() for x in lines[i + 1 :]):
            if run:
                yield quoted, run
            yield True, lines[i:]
            return
        is_quote = line.lstrip().startswith(">")
        if run and is_quote != quoted:
            yield quoted, run
            run = []
        quoted = is_quote
        run.append(line)
    if run:
        yield quoted, run


def render(text: str | None, quoted_label: str = "Quoted text") -> Markup:
    """The message's HTML; `quoted_label` names the folded quotes (the reader's language)."""
    lines = clean(text or "").split("\n")
    parts: list[str] = []
    for quoted, block in _blocks(lines):
        if not quoted:
            parts.append(_lines(block))
            continue
        # The line break before a fold belongs to the text above it; details is a block.
        parts.append(
            f'<details class="quoted"><summary>{escape(quoted_label)}</summary>'
            f"<div>{_lines(block)}</div></details>"
        )
    return Markup("\n".join(parts))
