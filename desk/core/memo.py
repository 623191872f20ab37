"""A bounded memo of values made of one object: the page watcher shares what it makes of a row
the change feed's memory remembers (one object for every page) instead of making it once per
page (desk/reads/recall.py, ui/rowpiece.py; docs/architecture.md, "Polling").

The key is the object's identity plus whatever else the value depends on. An entry holds its
object, so an `id` cannot stand for another object while the entry lives. Bounded: when full it
is cleared, and a forgotten value is made again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class ByObject(Generic[V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._made: dict[tuple[Any, ...], tuple[object, V]] = {}

    def get(self, obj: object, key: tuple[Hashable, ...], make: Callable[[], V]) -> V:
        """The value made of `obj` for `key`, made by `make` when not kept."""
        full = (id(obj), *key)
        hit = self._made.get(full)
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = make()
        if len(self._made) >= self.size:
            self._made.clear()
        self._made[full] = (obj, value)
        return value

    def clear(self) -> None:
        self._made.clear()
