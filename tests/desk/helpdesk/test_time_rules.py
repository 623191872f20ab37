"""desk.helpdesk.time_rules: what a team's time rules do next to a ticket, once per rule and
revision, and an earlier plan superseded by any change."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from desk.core.errors import ValidationProblem
from desk.helpdesk.time_rules import Action, Rules, Ticket, next_action, still_applies

T0 = datetime(2026, 12, 7, 10, tzinfo=UTC)
RULES = Rules(close_resolved_after=7, remind_pending_after=3, resolve_pending_after=4)


def ticket(status: str, **kw: object) -> Ticket:
    return Ticket(**{"id": 5, "status": status, "status_since": T0, "revision": 1, **kw})  # type: ignore[arg-type]


def test_a_resolved_ticket_closes_after_its_days() -> None:
    assert next_action(RULES, ticket("RESOLVED")) == Action(
        "close", T0 + timedelta(days=7), "ticket-rule:close:5:1"
    )


def test_a_pending_ticket_reminds_the_customer_then_resolves() -> None:
    first = next_action(RULES, ticket("PENDING"))
    assert first == Action("remind", T0 + timedelta(days=3), "ticket-rule:remind:5:1")
    reminded = ticket("PENDING", reminded_at=T0 + timedelta(days=3, minutes=1))
    assert next_action(RULES, reminded) == Action(
        "resolve", T0 + timedelta(days=7, minutes=1), "ticket-rule:resolve:5:1"
    )


def test_open_tickets_and_missing_rules_do_nothing() -> None:
    assert next_action(RULES, ticket("OPEN")) is None
    assert next_action(Rules(), ticket("RESOLVED")) is None
    assert next_action(Rules(remind_pending_after=2), ticket("PENDING", reminded_at=T0)) is None


def test_a_change_to_the_ticket_supersedes_the_earlier_plan() -> None:
    planned = next_action(RULES, ticket("RESOLVED"))
    assert planned is not None and still_applies(RULES, ticket("RESOLVED"), planned)
    reopened_and_resolved = ticket("RESOLVED", revision=2, status_since=T0 + timedelta(days=2))
    assert not still_applies(RULES, reopened_and_resolved, planned)  # another revision
    assert not still_applies(RULES, ticket("OPEN", revision=2), planned)


def test_the_same_revision_never_gets_the_same_action_twice() -> None:
    t = ticket("PENDING")
    remind = next_action(RULES, t)
    assert remind is not None
    after = replace(t, reminded_at=remind.at)
    following = next_action(RULES, after)
    assert following is not None and following.key != remind.key
    assert not still_applies(RULES, after, remind)


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"close_resolved_after": 0}, "close_resolved_after"),
        ({"remind_pending_after": 5000}, "remind_pending_after"),
        ({"resolve_pending_after": 3}, "resolve_pending_after"),
    ],
)
def test_rules_that_make_no_sense_are_refused(rules: dict[str, int], field: str) -> None:
    with pytest.raises(ValidationProblem) as refused:
        Rules(**rules)
    assert refused.value.field == field
