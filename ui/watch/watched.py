"""The rows a page watches, as it sends them to `GET /watch` (`id:since:version:cancel`): read by
the watcher (ui.watch.watcher) and by the unchanged-tick check (ui.watch.unchanged), so the check
never imports the watcher (pyproject.toml's contract on ui.watch)."""

from __future__ import annotations

from typing import NamedTuple

from desk.core.errors import ValidationProblem
from desk.reads.lookups import MAX_ID


class Watched(NamedTuple):
    """One row as the page sends it (a tuple: sixty of these are made per tick)."""

    id: int
    since: float
    version: str
    cancel: bool


def parse_row(token: str) -> Watched:
    """`id:since:version:cancel` as the page's rows render it; anything else is a clear 400."""
    parts = token.split(":")
    try:
        if len(parts) != 4 or parts[3] not in ("0", "1"):
            raise ValueError
        row = Watched(int(parts[0]), float(parts[1]), parts[2], parts[3] == "1")
    except ValueError:
        raise ValidationProblem("r", "each row as id:since:version:cancel") from None
    if not 0 < row.id <= MAX_ID or not 0 <= row.since < 1e11 or len(row.version) > 16:
        raise ValidationProblem("r", "each row as id:since:version:cancel")
    return row
