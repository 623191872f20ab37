"""ui.rowpiece: a row's markup shared by every tick that shows the same row object is byte for byte
what building its view and rendering it gives, for each viewer, moment, age, locale and call; it
never hands one viewer's or one moment's row to another, nor one object's row to another."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from desk.core.rows import TaskRow
from ui import render, rowcache, rowpiece, taskview

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
OWNER, OTHER = 5, 7
BERLIN = ZoneInfo("Europe/Berlin")


def _task(**changes: Any) -> TaskRow:
    values: dict[str, Any] = dict(
        id=123,
        kind="EXPORT",
        status="COMPLETED",
        progress=1.0,
        progress_current=500,
        progress_total=500,
        progress_message="",
        attempts=1,
        max_attempts=3,
        last_error=None,
        error_key=None,
        error_params={},
        note="",
        run_at=NOW,
        created_at=NOW,
        started_at=NOW,
        finished_at=NOW,
        result_summary="500 rows",
        summary_key=None,
        summary_params={},
        result_skipped=False,
        result_bytes=1234,
        expires_at=NOW + timedelta(hours=1),
        cancel_requested=False,
        lease_until=None,
        dispatched_at=None,
        filters={"q": "printer"},
        stats={},
        team_id=1,
        owner_id=OWNER,
        ticket_id=None,
        updated_at=NOW,
    )
    return TaskRow(**(values | changes))


@pytest.fixture(autouse=True)
def _empty() -> None:
    rowpiece.clear()
    rowcache.clear()


def _built(task: TaskRow, viewer: int, now: datetime, since: float | None, **kw: Any) -> str:
    """What the page watcher answered before: the view built, the row rendered."""
    locale, tz = kw.get("locale", "en"), kw.get("tz", BERLIN)
    view = taskview.build(task, viewer_id=viewer, now=now, since=since, ticket_title=None)
    macro = render.row_macro(locale)
    return str(
        rowcache.row_html(locale, macro, view, tz, kw.get("cancel", True), kw.get("oob", False))
    )


def _piece(task: TaskRow, viewer: int, now: datetime, since: float | None, **kw: Any) -> str:
    _, html = rowpiece.piece(
        kw.get("locale", "en"),
        kw.get("tz", BERLIN),
        task,
        viewer_id=viewer,
        now=now,
        since=since,
        title=None,
        paused_lanes=frozenset(),
        cancel=kw.get("cancel", True),
        oob=kw.get("oob", False),
    )
    return str(html)


def test_a_shared_row_is_what_building_it_gives_for_each_viewer_and_call() -> None:
    task = _task()
    calls = [
        {"locale": "en", "cancel": True, "oob": False},
        {"locale": "zh", "cancel": True, "oob": True},
        {"locale": "en", "cancel": False, "oob": True, "tz": ZoneInfo("UTC")},
    ]
    for viewer in (OWNER, OTHER, OWNER):  # the owner again: from the memo
        for kw in calls:
            assert _piece(task, viewer, NOW, None, **kw) == _built(task, viewer, NOW, None, **kw)
    owners = _piece(task, OWNER, NOW, None)
    assert "/download" in owners and "/download" not in _piece(task, OTHER, NOW, None)


def test_time_turns_the_shared_row() -> None:
    task = _task()
    later = NOW + timedelta(hours=2)  # the export expired meanwhile: no write, no new object
    assert 'data-status="Completed"' in _piece(task, OWNER, NOW, None)
    expired = _piece(task, OWNER, later, None)
    assert 'data-status="Expired"' in expired and "/download" not in expired
    assert expired == _built(task, OWNER, later, None)
    # Nothing of the viewer's moves with it: the label alone tells the two moments apart.
    assert 'data-status="Completed"' in _piece(task, OTHER, NOW, None)
    assert 'data-status="Expired"' in _piece(task, OTHER, later, None)
    running = _task(status="RUNNING", progress=0.5, lease_until=NOW + timedelta(seconds=30))
    assert 'data-status="Running"' in _piece(running, OTHER, NOW, None)
    assert 'data-status="Worker lost"' in _piece(running, OTHER, NOW + timedelta(minutes=1), None)


def test_each_page_gets_its_own_since_and_delay() -> None:
    task = _task(status="RUNNING", progress=0.5, lease_until=NOW + timedelta(minutes=1))
    stamp = NOW.timestamp()
    for since in (stamp, stamp - 1, stamp - 3, stamp - 30, stamp - 700):  # 1, 1, 2, 10 s, stale
        got = _piece(task, OTHER, NOW, since)
        assert got == _built(task, OTHER, NOW, since), since
    assert f'data-since="{stamp - 3:.3f}"' in _piece(task, OTHER, NOW, stamp - 3)
    assert "Stopped checking automatically" in _piece(task, OTHER, NOW, stamp - 700)


def test_another_object_for_the_same_task_is_not_taken_for_the_first() -> None:
    first = _task(status="RUNNING", progress=0.25, lease_until=NOW + timedelta(minutes=1))
    moved = replace(first, progress=0.75, progress_current=375)  # updated_at left as it was
    assert "25%" in _piece(first, OTHER, NOW, None)
    assert "75%" in _piece(moved, OTHER, NOW, None)
    assert _piece(moved, OTHER, NOW, None) == _built(moved, OTHER, NOW, None)
