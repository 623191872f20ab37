"""Rows read as JSON, back to the types the same columns read as plain rows: a statement that
answers several parts at once (desk/reads/ticket_page.py) returns each part of many rows as a
JSON array of positional arrays (`json_array`), and `decoder` turns one of those back into its
dataclass with the values psycopg would have given — JSON has no timestamps (ISO text here) and
writes a whole float as an integer (`1` for a double precision 1.0)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, TypeVar

T = TypeVar("T")


def json_array(columns: Sequence[str], order: str) -> str:
    """The aggregate of `columns` as one JSON array of positional arrays in `order` (NULL for no
    row). One aggregate per part, so each part's rows stay whole whatever the sort does."""
    return f"json_agg(json_build_array({', '.join(columns)}) ORDER BY {order})"


def _is(hint: Any, kind: type) -> bool:
    """`hint` is `kind` or `kind | None`."""
    if hint is kind:
        return True
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    return union and kind in typing.get_args(hint)


def converter(cls: type[Any]) -> Callable[[list[Any]], list[Any]]:
    """A function that gives the JSON values of `cls`'s fields (the first ones of a row, in
    field order) their types in place: timestamps and floats; the rest are JSON's already."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in fields(cls)]
    times = [i for i, n in enumerate(names) if _is(hints[n], datetime)]
    floats = [i for i, n in enumerate(names) if _is(hints[n], float)]

    def convert(row: list[Any]) -> list[Any]:
        for i in times:
            if row[i] is not None:
                row[i] = datetime.fromisoformat(row[i])
        for i in floats:
            if row[i] is not None:
                row[i] = float(row[i])
        return row

    return convert


def decoder(cls: type[T]) -> Callable[[list[Any]], T]:
    """One JSON row (`json_array`'s, of exactly `cls`'s fields) as a `cls`."""
    convert = converter(cls)
    return lambda row: cls(*convert(row))
