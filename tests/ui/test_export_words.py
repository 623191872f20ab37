"""An export row's words (ui.taskview.describe_export) are worked out once per distinct
filters and are the words the filters give."""

from __future__ import annotations


def test_export_words_are_worked_out_once_per_filters() -> None:
    from desk.helpdesk.filters import parse_filter
    from ui import taskview

    for raw in ({"q": "x"}, {"status": ["OPEN"], "q": "x"}, {"q": 1}, {"bogus": 1}, {}):
        once, again = taskview.describe_export(raw), taskview.describe_export(dict(raw))
        try:
            expected = parse_filter(raw).describe()
        except Exception:
            expected = "Tickets (filters no longer valid)"
        assert once == again == expected, raw
