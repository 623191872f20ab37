"""desk.core.memo.ByObject: a value is made once per object and key, never handed to another
object (even an equal one), and the memo stays within its bound."""

from __future__ import annotations

from desk.core.memo import ByObject


def test_made_once_per_object_and_key_and_bounded() -> None:
    made: list[tuple[int, str]] = []
    memo: ByObject[str] = ByObject(size=3)

    def get(obj: list[int], key: str) -> str:
        def make() -> str:
            made.append((id(obj), key))
            return f"{obj}{key}"

        return memo.get(obj, (key,), make)

    first, equal = [1], [1]
    assert get(first, "a") == "[1]a" and get(first, "a") == "[1]a"
    assert made == [(id(first), "a")]  # the second time from the memo
    assert get(first, "b") == "[1]b" and get(equal, "a") == "[1]a"  # another key, another object
    assert len(made) == 3
    get([2], "a")  # a fourth entry: the memo was full, so it starts again
    get(first, "a")
    assert len(made) == 5
