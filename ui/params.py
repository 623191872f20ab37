"""One statement of a polled route's query parameters, read by both ways in (issue 11).

`GET /watch` and `GET /tasks/{id}` are answered by their FastAPI routes and, in the plain case,
by the short way (ui.fast) that skips the router. Each parameter is declared once here (its
name, default and limits); the route builds its `Query(...)` from it and the short way checks a
raw value against it, so a limit cannot change in one place only.

The short way is stricter than the route on purpose: it takes only the plain spelling of a
value (no sign on a positive number, no leading zeros, no exponent) and raises `Declined` for
anything else, so the router answers every odd or refused value as it always has.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import Query

_INT = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_FLOAT = re.compile(r"[0-9]{1,15}(\.[0-9]{1,9})?")  # no sign: the router reads those


class Declined(Exception):
    """The short way does not take this request; the router will."""


@dataclass(frozen=True)
class Number:
    """An int (or float, `real`) query parameter with its bounds; None default: optional."""

    name: str
    default: Any = None
    ge: float | None = None
    le: float | None = None
    real: bool = False

    def query(self) -> Any:
        return Query(alias=self.name, ge=self.ge, le=self.le)

    def read(self, raw: str) -> int | float:
        if not (_FLOAT if self.real else _INT).fullmatch(raw):
            raise Declined
        value = float(raw) if self.real else int(raw)
        if (self.ge is not None and value < self.ge) or (self.le is not None and value > self.le):
            raise Declined
        return value


@dataclass(frozen=True)
class Text:
    """A short string parameter: at most `max_length` characters, or one of `choices`."""

    name: str
    default: Any = None
    max_length: int | None = None
    choices: tuple[str, ...] = ()

    def query(self) -> Any:
        pattern = "^(" + "|".join(map(re.escape, self.choices)) + ")$" if self.choices else None
        return Query(alias=self.name, max_length=self.max_length, pattern=pattern)

    def read(self, raw: str) -> str:
        too_long = self.max_length is not None and len(raw) > self.max_length
        if too_long or (self.choices and raw not in self.choices):
            raise Declined
        return raw


@dataclass(frozen=True)
class Repeated:
    """A parameter given once per item (`r=…&r=…`), at most `max_items` times."""

    name: str
    max_items: int

    def query(self) -> Any:
        return Query(alias=self.name, max_length=self.max_items)


Scalar = Number | Text


def query_pairs(scope: Mapping[str, Any]) -> list[tuple[str, str]]:
    # As Starlette reads it (QueryParams): latin-1, blank values kept.
    raw = scope.get("query_string", b"")
    return parse_qsl(raw.decode("latin-1"), keep_blank_values=True) if raw else []


def read(
    scope: Mapping[str, Any],
    scalars: dict[str, Scalar],
    repeated: dict[str, Repeated] | None = None,
) -> dict[str, Any]:
    """The query as the route's keyword arguments (keys of `scalars` / `repeated`), the last
    value of a scalar winning as for the route; Declined where the route would refuse it or
    might read it otherwise. Unknown parameters are ignored, as the route ignores them."""
    repeated = repeated or {}
    by_name = {spec.name: key for key, spec in scalars.items()}
    lists = {spec.name: key for key, spec in repeated.items()}
    raw: dict[str, str] = {}
    out: dict[str, Any] = {key: [] for key in repeated}
    for name, value in query_pairs(scope):
        if name in lists:
            out[lists[name]].append(value)
        elif name in by_name:
            raw[by_name[name]] = value
    for key, spec in repeated.items():
        if len(out[key]) > spec.max_items:
            raise Declined
    for key, scalar in scalars.items():
        out[key] = scalar.read(raw[key]) if key in raw else scalar.default
    return out
