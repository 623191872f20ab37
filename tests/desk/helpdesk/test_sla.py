"""desk.helpdesk.sla: a ticket's clocks in business hours — due and warning instants, pending
time left out, met and breached to the second — with `now` given, never read."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from desk.core.errors import ValidationProblem
from desk.helpdesk import business_hours as bh
from desk.helpdesk import sla

BERLIN = ZoneInfo("Europe/Berlin")
HOUR = 3600
OFFICE = bh.calendar(
    "Europe/Berlin", {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
)
POLICY = sla.Policy(
    {
        "first_response": {"URGENT": 1 * HOUR, "NORMAL": 8 * HOUR},
        "next_response": {"URGENT": 2 * HOUR},
        "resolution": {"URGENT": 8 * HOUR},
    }
)


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=BERLIN)  # type: ignore[misc]


def by_target(clocks: list[sla.Clock]) -> dict[str, sla.Clock]:
    return {c.target: c for c in clocks}


def test_an_urgent_ticket_warns_before_its_first_response_and_breaches_to_the_second() -> None:
    facts = sla.Facts("URGENT", created_at=at(2026, 12, 7, 16, 30))  # Monday 16:30
    first = by_target(sla.clocks(POLICY, OFFICE, facts, now=at(2026, 12, 7, 16, 40)))[
        "first_response"
    ]
    # 30 minutes on Monday, 30 more on Tuesday morning; the warning at 45 minutes in.
    assert first.due_at == at(2026, 12, 8, 9, 30)
    assert first.warn_at == at(2026, 12, 8, 9, 15)
    assert first.state == "running" and first.left == 50 * 60
    just_before = at(2026, 12, 8, 9, 29, 59)
    assert (
        by_target(sla.clocks(POLICY, OFFICE, facts, just_before))["first_response"].state
        == "running"
    )
    breached = by_target(sla.clocks(POLICY, OFFICE, facts, at(2026, 12, 8, 9, 30)))[
        "first_response"
    ]
    assert breached.state == "breached" and breached.left == 0


def test_a_target_met_in_time_stays_met() -> None:
    facts = sla.Facts(
        "URGENT", created_at=at(2026, 12, 7, 10), first_response_at=at(2026, 12, 7, 10, 59)
    )
    first = by_target(sla.clocks(POLICY, OFFICE, facts, now=at(2026, 12, 9, 12)))["first_response"]
    assert first.state == "met" and first.left == 60
    late = sla.Facts(
        "URGENT", created_at=at(2026, 12, 7, 10), first_response_at=at(2026, 12, 7, 11, 1)
    )
    assert (
        by_target(sla.clocks(POLICY, OFFICE, late, now=at(2026, 12, 9)))["first_response"].state
        == "breached"
    )


def test_pending_time_is_left_out_and_a_pause_now_has_no_due_time() -> None:
    created = at(2026, 12, 7, 9)
    pending = [(at(2026, 12, 7, 10), at(2026, 12, 7, 13))]  # three hours waiting on the customer
    facts = sla.Facts("URGENT", created_at=created, pending=pending)
    resolution = by_target(sla.clocks(POLICY, OFFICE, facts, now=at(2026, 12, 7, 14)))["resolution"]
    assert resolution.due_at == at(2026, 12, 8, 12)  # 8 h of business time, 3 of them skipped
    assert resolution.left == 6 * HOUR
    paused = sla.Facts("URGENT", created_at=created, pending=[(at(2026, 12, 7, 11), None)])
    now = at(2026, 12, 9, 16)
    clock = by_target(sla.clocks(POLICY, OFFICE, paused, now))["resolution"]
    assert (clock.state, clock.due_at, clock.warn_at, clock.left) == (
        "paused",
        None,
        None,
        6 * HOUR,
    )


def test_next_response_runs_from_the_customer_s_oldest_unanswered_message() -> None:
    facts = sla.Facts(
        "URGENT",
        created_at=at(2026, 12, 7, 9),
        first_response_at=at(2026, 12, 7, 9, 30),
        waiting_since=at(2026, 12, 7, 15, 30),
    )
    nxt = by_target(sla.clocks(POLICY, OFFICE, facts, now=at(2026, 12, 7, 16)))["next_response"]
    assert nxt.started_at == at(2026, 12, 7, 15, 30)
    assert nxt.due_at == at(2026, 12, 8, 9, 30)
    answered = sla.Facts(
        "URGENT", created_at=at(2026, 12, 7, 9), first_response_at=at(2026, 12, 7, 9, 30)
    )
    assert "next_response" not in by_target(
        sla.clocks(POLICY, OFFICE, answered, at(2026, 12, 7, 16))
    )


def test_only_the_targets_set_for_the_ticket_s_priority_run() -> None:
    facts = sla.Facts("NORMAL", created_at=at(2026, 12, 7, 9))
    assert [c.target for c in sla.clocks(POLICY, OFFICE, facts, at(2026, 12, 7, 9))] == [
        "first_response"
    ]
    assert (
        sla.clocks(POLICY, OFFICE, sla.Facts("LOW", created_at=at(2026, 12, 7, 9)), at(2026, 12, 7))
        == []
    )


def test_a_resolved_ticket_that_is_reopened_later_still_counts_from_its_creation() -> None:
    facts = sla.Facts(
        "URGENT", created_at=at(2026, 12, 7, 9), resolved_at=at(2026, 12, 7, 16, 59, 59)
    )
    assert (
        by_target(sla.clocks(POLICY, OFFICE, facts, at(2026, 12, 8)))["resolution"].state == "met"
    )


def test_clocks_cross_a_daylight_saving_change_in_business_hours() -> None:
    # Friday 27 March 2026, 16:30, before Berlin's spring-forward Sunday: first response is due
    # on Monday 09:30 summer time, 07:30 UTC.
    facts = sla.Facts("URGENT", created_at=at(2026, 3, 27, 16, 30))
    first = by_target(sla.clocks(POLICY, OFFICE, facts, at(2026, 3, 27, 16, 31)))["first_response"]
    assert first.due_at == at(2026, 3, 30, 9, 30)
    assert first.due_at - first.started_at == timedelta(days=2, hours=16)  # 1 h less that weekend


@pytest.mark.parametrize(
    ("targets", "share", "says"),
    [
        ({"first_response": {"URGENT": 0}}, 0.75, "above zero"),
        ({"first_answer": {"URGENT": 60}}, 0.75, "unknown target"),
        ({"first_response": {"URGENT": 60}}, 1.0, "between 0 and 1"),
    ],
)
def test_a_policy_that_makes_no_sense_is_refused(targets, share, says) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationProblem, match=says):
        sla.Policy(targets, warn_share=share)
