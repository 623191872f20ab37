"""The polled routes' query parameters, each declared once (its name, default and limits).

`GET /watch` and the htmx `GET /tasks/{id}` are answered by raw handlers (ui.watch.polled) that read
their query here; the row's page (`GET /tasks/{id}` without htmx) builds its `Query(...)` from the
same declaration, so a limit cannot change in one place only.

`read` takes only the plain spelling of a value (no sign on a positive number, no leading zeros,
no exponent), without a validator, and raises `Declined` for anything else. `strict` reads an odd
query as a FastAPI route would, with pydantic, and refuses what the route refuses with the same
400 and message (ui.route): the pages' answers to odd input do not depend on which reader ran.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Query
from pydantic import Field, TypeAdapter, ValidationError

from desk.core.errors import NotFound, ValidationProblem

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


def _sorted_out(
    scope: Mapping[str, Any], scalars: dict[str, Scalar], repeated: dict[str, Repeated]
) -> tuple[dict[str, str], dict[str, Any]]:
    """The query's values by the route's keyword: (the last raw value of each scalar, every
    value of each repeated one); unknown parameters dropped, as the route drops them."""
    by_name = {spec.name: key for key, spec in scalars.items()}
    lists = {spec.name: key for key, spec in repeated.items()}
    raw: dict[str, str] = {}
    out: dict[str, Any] = {key: [] for key in repeated}
    for name, value in query_pairs(scope):
        if name in lists:
            out[lists[name]].append(value)
        elif name in by_name:
            raw[by_name[name]] = value
    return raw, out


def read(
    scope: Mapping[str, Any],
    scalars: dict[str, Scalar],
    repeated: dict[str, Repeated] | None = None,
) -> dict[str, Any]:
    """The query as the route's keyword arguments (keys of `scalars` / `repeated`), the last
    value of a scalar winning as for the route; Declined where the route would refuse it or
    might read it otherwise. Unknown parameters are ignored, as the route ignores them."""
    repeated = repeated or {}
    raw, out = _sorted_out(scope, scalars, repeated)
    for key, spec in repeated.items():
        if len(out[key]) > spec.max_items:
            raise Declined
    for key, scalar in scalars.items():
        out[key] = scalar.read(raw[key]) if key in raw else scalar.default
    return out


@cache
def _adapter(spec: Scalar | Repeated) -> TypeAdapter[Any]:
    """The validator a route builds from the spec's `Query(...)`, for one raw value."""
    kind: Any
    if isinstance(spec, Number):
        kind = Annotated[float if spec.real else int, Field(ge=spec.ge, le=spec.le)]
    elif isinstance(spec, Text):
        pattern = "^(" + "|".join(map(re.escape, spec.choices)) + ")$" if spec.choices else None
        kind = Annotated[str, Field(max_length=spec.max_length, pattern=pattern)]
    else:
        kind = Annotated[list[str], Field(max_length=spec.max_items)]
    return TypeAdapter(kind)


def _refused(name: str, error: ValidationError) -> ValidationProblem:
    """A refused parameter as a page route says it (ui.route): 400, pydantic's message."""
    problem = ValidationProblem(name, str(error.errors()[0]["msg"]))
    problem.http_status = 400
    return problem


def path_id(raw: str) -> int:
    """A path's `{…_id}` as a route's `int` reads it; anything else does not exist (404)."""
    try:
        return int(_ID_ADAPTER.validate_python(raw))
    except ValidationError:
        raise NotFound() from None


_ID_ADAPTER: TypeAdapter[int] = TypeAdapter(int)


def strict(
    scope: Mapping[str, Any],
    scalars: dict[str, Scalar],
    repeated: dict[str, Repeated] | None = None,
) -> dict[str, Any]:
    """The query as `read` gives it, for any spelling the route takes; a value the route refuses
    raises its 400 (the first in the route's order: the repeated ones, then the scalars)."""
    repeated = repeated or {}
    raw, out = _sorted_out(scope, scalars, repeated)
    for key, spec in repeated.items():
        out[key] = _checked(spec, out[key])
    for key, scalar in scalars.items():
        out[key] = _checked(scalar, raw[key]) if key in raw else scalar.default
    return out


def _checked(spec: Scalar | Repeated, value: Any) -> Any:
    try:
        return _adapter(spec).validate_python(value)
    except ValidationError as error:
        raise _refused(spec.name, error) from None
