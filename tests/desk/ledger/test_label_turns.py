"""`rules.label_turns_at`: until that instant `status_label` reads the same, and at it (or just
after) otherwise; None means only a write changes the label. The page watcher's memory keeps a
row's version until then (ui/watch/unchanged.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from desk.core.feed import TaskNote
from desk.ledger import rules

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
BASE = TaskNote(1, 1, 1, "EXPORT", "WAITING", 0, NOW, None, None, False, 0, False, None)

CASES = {
    "scheduled": replace(BASE, kind="REMINDER", run_at=NOW + 60 * S),
    "queued": BASE,
    "retrying": replace(BASE, attempts=1, run_at=NOW + 60 * S),
    "running": replace(BASE, status="RUNNING", lease_until=NOW + 30 * S),
    "lost": replace(BASE, status="RUNNING", lease_until=NOW - S),
    "cancelling": replace(BASE, status="RUNNING", lease_until=NOW + 30 * S, cancel_requested=True),
    "kept export": replace(BASE, status="COMPLETED", expires_at=NOW + 3600 * S, result_bytes=9),
    "expired": replace(BASE, status="COMPLETED", expires_at=NOW - S),
    "skipped": replace(BASE, kind="REMINDER", status="COMPLETED", result_skipped=True),
    "failed": replace(BASE, status="FAILED"),
}


@pytest.mark.parametrize("name", CASES)
def test_the_label_holds_until_it_turns(name: str) -> None:
    task = CASES[name]
    label = rules.status_label(task, NOW)
    turns = rules.label_turns_at(task, NOW)
    horizon = turns if turns is not None else NOW + timedelta(days=30)
    for at in (NOW, NOW + (horizon - NOW) / 2, horizon - timedelta(microseconds=1)):
        assert rules.status_label(task, at) == label, (name, at)
    if turns is not None:
        assert rules.status_label(task, turns + timedelta(microseconds=1)) != label, name
