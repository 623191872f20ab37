"""desk.core.inputs: the checks every value from outside passes before it reaches SQL."""

from __future__ import annotations

import pytest

from desk.core import inputs
from desk.core.errors import ValidationProblem


@pytest.mark.parametrize(
    "value,reason",
    [
        ("a\x00b", "NUL"),
        ("a\ud800b", "unpaired surrogate"),
        ("a\udfffb", "unpaired surrogate"),
        ("a\x07b", "control character"),
        ("a\x1bb", "control character"),
        ("a\x7fb", "control character"),
    ],
)
def test_text_refuses_bad_characters_naming_the_field(value, reason) -> None:
    with pytest.raises(ValidationProblem) as err:
        inputs.text("body", value, max_len=100)
    assert err.value.field == "body" and reason in err.value.detail


def test_text_keeps_tabs_newlines_and_any_language() -> None:
    value = "第一行\n\tsecond line\r\n² ½ émoji 🎉"
    assert inputs.text("body", value, max_len=100) == value
    assert inputs.line("title", "  a \n b\t c  ", max_len=10) == "a b c"
    with pytest.raises(ValidationProblem, match="at most 3"):
        inputs.line("title", "abcd", max_len=3)
    with pytest.raises(ValidationProblem, match="must be text"):
        inputs.text("title", 42, max_len=3)


@pytest.mark.parametrize("value", ["²", "9" * 5000, "-1", "+1", "1e3", "0x10", " ", "", "١٢"])
def test_integers_are_ascii_digits_only(value) -> None:
    assert inputs.optional_id(value) is None
    with pytest.raises(ValidationProblem):
        inputs.integer("limit", value)


def test_ids_are_positive_int4() -> None:
    assert inputs.optional_id("42") == 42 and inputs.optional_id(" 7 ") == 7
    assert inputs.optional_id(str(2**31 - 1)) == 2**31 - 1
    assert inputs.optional_id(str(2**31)) is None and inputs.optional_id("0") is None
    assert inputs.optional_id(True) is None and inputs.optional_id(None) is None
    assert inputs.integer("start", "0") == 0
    with pytest.raises(ValidationProblem, match="from 1 to 5"):
        inputs.integer("n", 9, lo=1, hi=5)


@pytest.mark.parametrize("value", ["", "x" * 201, "abc\x00", "caf\u00e9", "a b\n"])
def test_cursors_are_short_printable_ascii(value) -> None:
    with pytest.raises(ValidationProblem) as err:
        inputs.cursor("after", value)
    assert err.value.field == "after"
    assert inputs.cursor("after", "MjAyNi0xMS0zMHwxMg==") == "MjAyNi0xMS0zMHwxMg=="
