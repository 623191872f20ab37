"""Input checks at the edge of desk: text, integers and cursors from people and clients.

Every value that reaches SQL from outside goes through one of these first, so a bad value is a
`ValidationProblem` naming the field — never a driver error (PostgreSQL refuses NUL in text,
UTF-8 cannot encode a lone surrogate, an int4 column refuses a 5,000-digit number, and Python's
`int()` accepts `²` for `isdigit()` but then fails). GraphQL, the pages, the CLI and the
importer call the same functions.
"""

from __future__ import annotations

import re

from desk.core.errors import ValidationProblem

# Ids and counters are int4 columns.
MAX_INT4 = 2**31 - 1
# C0 controls other than tab, LF and CR; DEL; lone surrogates (U+D800..U+DFFF). One-line text
# folds tab, LF and CR to spaces (`line`), so one set serves both.
_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_ASCII_DIGITS = re.compile(r"[0-9]{1,10}")


def problem_in(value: str) -> str | None:
    """What is wrong with the characters of `value`, or None when it is clean."""
    found = _BAD.search(value)
    if found is None:
        return None
    char = found.group()
    if char == "\x00":
        return "contains a NUL character (\\u0000); remove it"
    if "\ud800" <= char <= "\udfff":
        return f"contains an unpaired surrogate (\\u{ord(char):04x}); send valid Unicode text"
    return f"contains a control character (\\u{ord(char):04x}); remove it"


def without_bad(value: str) -> str:
    """`value` without the characters PostgreSQL or UTF-8 refuse (and other C0 controls):
    for text nobody can be asked to fix, such as a fetched e-mail's."""
    return _BAD.sub("", value)


def label(value: str, *, max_len: int, default: str) -> str:
    """A name kept only to show it again (an uploaded file's name): the characters PostgreSQL
    or UTF-8 refuse are dropped rather than refused, since the client rarely chose them."""
    return without_bad(value).strip()[:max_len] or default


def text(field: str, value: object, *, max_len: int) -> str:
    """A clean string of at most `max_len` characters (checked before anything else is done)."""
    if not isinstance(value, str):
        raise ValidationProblem(field, "must be text")
    if len(value) > max_len:
        raise ValidationProblem(field, f"at most {max_len:,} characters")
    bad = problem_in(value)
    if bad is not None:
        raise ValidationProblem(field, bad)
    return value


def line(field: str, value: object, *, max_len: int) -> str:
    """One line of text, whitespace runs folded to one space and trimmed."""
    raw = text(field, value, max_len=max_len * 4 + 64)
    folded = " ".join(raw.split())
    if len(folded) > max_len:
        raise ValidationProblem(field, f"at most {max_len:,} characters")
    return folded


def integer(field: str, value: object, *, lo: int = 0, hi: int = MAX_INT4) -> int:
    """An integer from input: ASCII digits only (no `²`, no sign, no 5,000 digits), in range."""
    if isinstance(value, bool):
        raise ValidationProblem(field, "must be a whole number")
    if isinstance(value, int):
        number = value
    else:
        raw = str(value).strip() if isinstance(value, str) else ""
        if not _ASCII_DIGITS.fullmatch(raw):
            raise ValidationProblem(field, f"must be a whole number from {lo} to {hi}")
        number = int(raw)
    if not lo <= number <= hi:
        raise ValidationProblem(field, f"must be a whole number from {lo} to {hi}")
    return number


def optional_id(value: object) -> int | None:
    """A positive int4 id, or None for anything else (a forged id is simply "not found")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 1 <= value <= MAX_INT4 else None
    raw = value.strip() if isinstance(value, str) else ""
    if not _ASCII_DIGITS.fullmatch(raw):
        return None
    number = int(raw)
    return number if 1 <= number <= MAX_INT4 else None


def cursor(field: str, value: object, *, max_len: int = 200) -> str:
    """A list cursor as given out (printable ASCII, short); its meaning is checked by the list."""
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise ValidationProblem(field, "not a cursor this list gave out")
    if not value.isascii() or not value.isprintable():
        raise ValidationProblem(field, "not a cursor this list gave out")
    return value


def size_text(n: int) -> str:
    """50 MiB, 64 KiB: a limit as people read it (binary units, as the defaults are set)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"
