"""Languages: which locale a request gets, and the gettext catalogs the templates use.

Catalogs are ordinary gettext `.po` files (`ui/locale/<locale>/LC_MESSAGES/messages.po`, the
layout Babel's `extract`/`update` commands use). They are read directly at start — a few hundred
short strings — so no compile step is needed. The user's `locale` setting wins, else the
browser's Accept-Language (for pages shown before sign-in).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

LOCALE_DIR = Path(__file__).parent / "locale"
DEFAULT = "en"
SUPPORTED = ("en", "zh_Hans")
HTML_LANG = {"en": "en", "zh_Hans": "zh-Hans"}


def normalise(tag: str | None) -> str | None:
    """Map a language tag (zh-CN, zh_Hans, en-GB, …) to a supported locale, or None."""
    tag = (tag or "").strip().replace("_", "-").lower()
    if not tag:
        return None
    if tag.startswith("zh"):
        # Simplified Chinese is the only Chinese we have; traditional scripts get it too.
        return "zh_Hans"
    if tag.startswith("en"):
        return "en"
    return None


def from_accept_language(header: str | None) -> str | None:
    """The best supported locale in an Accept-Language header (by q value, then order)."""
    choices: list[tuple[float, int, str]] = []
    for i, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        locale = normalise(tag)
        if locale and q > 0:
            choices.append((-q, i, locale))
    return min(choices)[2] if choices else None


def pick(user_locale: str | None, accept_language: str | None) -> str:
    return normalise(user_locale) or from_accept_language(accept_language) or DEFAULT


def parse_po(text: str) -> dict[str, str]:
    """msgid → msgstr of a .po file (plural forms keep their first msgstr; fuzzy ones are skipped)."""
    catalog: dict[str, str] = {}
    entry: dict[str, str] = {}
    key = ""
    fuzzy = False

    def flush() -> None:
        msgid, msgstr = entry.get("msgid", ""), entry.get("msgstr", entry.get("msgstr[0]", ""))
        if msgid and msgstr and not fuzzy:
            catalog[msgid] = msgstr

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            if not line and entry:
                flush()
                entry, fuzzy = {}, False
            continue
        if line.startswith('"'):
            entry[key] = entry.get(key, "") + ast.literal_eval(line)
            continue
        key, _, value = line.partition(" ")
        if key == "msgid" and "msgstr" in entry:
            flush()
            entry, fuzzy = {}, fuzzy and False
        entry[key] = ast.literal_eval(value.strip())
    if entry:
        flush()
    return catalog


MAX_MISSING = 1000


class Catalog:
    """The gettext interface Jinja's i18n extension needs, over one parsed catalog.

    A translated catalog remembers the interface strings it was asked for and lacked
    (`missing`), so a test can render every page and fail on an untranslated one.
    """

    def __init__(self, messages: dict[str, str], *, source: bool = False) -> None:
        self.messages = messages
        self.source = source  # English: the msgids are the text
        self.missing: set[str] = set()

    def gettext(self, message: str) -> str:
        found = self.messages.get(message)
        if found:
            return found
        if not self.source and len(self.missing) < MAX_MISSING:
            self.missing.add(message)
        return message

    def domain_text(self, text: str | None) -> str:
        """Text the desk wrote (errors, summaries): translated when the catalog knows it, else
        shown as written — it is data, not an interface string, so it is not `missing`."""
        return self.messages.get(text or "") or (text or "")

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        # Chinese has one form; English takes the msgid's own singular/plural.
        translated = self.messages.get(singular)
        if translated:
            return translated
        if not self.source and len(self.missing) < MAX_MISSING:
            self.missing.add(singular)
        return singular if n == 1 else plural


@cache
def catalog(locale: str) -> Catalog:
    path = LOCALE_DIR / locale / "LC_MESSAGES" / "messages.po"
    if locale == DEFAULT or not path.exists():
        return Catalog({}, source=locale == DEFAULT)
    return Catalog(parse_po(path.read_text(encoding="utf-8")))
