"""desk.helpdesk.business_hours: due times and elapsed business time, across weekends,
holidays and both daylight-saving changes, and the refusals of a calendar that makes no sense."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from desk.core.errors import ValidationProblem
from desk.helpdesk import business_hours as bh

BERLIN = ZoneInfo("Europe/Berlin")
WEEKDAYS = {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")}
HOUR = 3600


def at(zone: ZoneInfo, *parts: int) -> datetime:
    return datetime(*parts, tzinfo=zone)  # type: ignore[misc]


def office(holidays: tuple[str, ...] = ()) -> bh.Calendar:
    return bh.calendar("Europe/Berlin", WEEKDAYS, holidays)


def test_a_target_runs_over_the_weekend_in_business_time() -> None:
    # Friday 4 December 2026, 16:00: one hour left on Friday, one more on Monday.
    due = office().due(at(BERLIN, 2026, 12, 4, 16), 2 * HOUR)
    assert due == at(BERLIN, 2026, 12, 7, 10)


def test_a_clock_started_outside_the_hours_starts_at_the_next_opening() -> None:
    saturday = at(BERLIN, 2026, 12, 5, 11, 30)
    assert office().due(saturday, 30 * 60) == at(BERLIN, 2026, 12, 7, 9, 30)
    assert office().elapsed(saturday, at(BERLIN, 2026, 12, 7, 9)) == 0


def test_split_days_count_only_their_open_parts() -> None:
    cal = bh.calendar("Europe/Berlin", {"mon": ["13:00-17:30", "09:00-12:00"]})
    monday = at(BERLIN, 2026, 12, 7, 11)
    assert cal.due(monday, 2 * HOUR) == at(BERLIN, 2026, 12, 7, 14)
    assert cal.elapsed(monday, at(BERLIN, 2026, 12, 7, 18)) == 1 * HOUR + 4.5 * HOUR


def test_a_holiday_is_closed_all_day() -> None:
    # Christmas Day 2026 is a Friday: Thursday 16:00 + 2 h is Monday 10:00.
    cal = office(("2026-12-25",))
    assert cal.due(at(BERLIN, 2026, 12, 24, 16), 2 * HOUR) == at(BERLIN, 2026, 12, 28, 10)
    assert office().due(at(BERLIN, 2026, 12, 24, 16), 2 * HOUR) == at(BERLIN, 2026, 12, 25, 10)


def test_business_hours_keep_their_length_across_spring_forward() -> None:
    # Europe/Berlin moves 02:00 → 03:00 on Sunday 29 March 2026: Friday 16:00 + 2 h is
    # Monday 10:00 in summer time, 08:00 UTC (it was 15:00 UTC on Friday).
    start = at(BERLIN, 2026, 3, 27, 16)
    due = office().due(start, 2 * HOUR)
    assert due == at(BERLIN, 2026, 3, 30, 10)
    assert due.astimezone(UTC) == datetime(2026, 3, 30, 8, tzinfo=UTC)
    assert office().elapsed(start, due) == 2 * HOUR


def test_a_whole_day_is_as_long_as_it_really_is_on_a_change_day() -> None:
    cal = bh.always("Europe/Berlin")
    spring, autumn = at(BERLIN, 2026, 3, 29), at(BERLIN, 2026, 10, 25)
    assert cal.elapsed(spring, at(BERLIN, 2026, 3, 30)) == 23 * HOUR
    assert cal.elapsed(autumn, at(BERLIN, 2026, 10, 26)) == 25 * HOUR
    # A day's worth of target from Sunday midnight ends at 01:00 on Monday, local time.
    assert cal.due(spring, 24 * HOUR) == at(BERLIN, 2026, 3, 30, 1)


def test_hours_inside_the_gap_of_a_change_day_never_run_backwards() -> None:
    # 02:00-02:59 does not exist on 8 March 2026 in New York: the span is read as the zone reads
    # it, and never yields an interval that ends before it starts.
    ny = ZoneInfo("America/New_York")
    cal = bh.calendar("America/New_York", {"sun": ["01:00-04:00"]})
    sunday = at(ny, 2026, 3, 8)
    used = cal.elapsed(sunday, at(ny, 2026, 3, 9))
    assert used == 2 * HOUR  # 01:00 EST to 04:00 EDT is two real hours
    assert all(b > a for a, b in _first(cal, sunday, 4))


def test_due_and_elapsed_answer_each_other() -> None:
    cal = office(("2026-12-25", "2027-01-01"))
    starts = [
        at(BERLIN, 2026, 12, 18, 8) + timedelta(hours=7 * i, minutes=13 * i) for i in range(12)
    ]
    for start in starts:
        for target in (60, 3 * HOUR, 11 * HOUR, 45 * HOUR):
            due = cal.due(start, target)
            assert cal.elapsed(start, due) == pytest.approx(target)
            assert due >= start


def test_nothing_to_count_is_due_at_once() -> None:
    saturday = at(BERLIN, 2026, 12, 5, 11)
    assert office().due(saturday, 0) == saturday
    assert office().elapsed(saturday, saturday - timedelta(hours=1)) == 0


@pytest.mark.parametrize(
    ("zone", "hours", "holidays", "field", "says"),
    [
        ("Mars/Olympus", WEEKDAYS, (), "zone", "not a time zone"),
        ("UTC", {"monday": ["09:00-17:00"]}, (), "hours", "unknown day"),
        ("UTC", {"mon": ["9-17"]}, (), "hours", "not like 09:00-17:00"),
        ("UTC", {"mon": ["17:00-09:00"]}, (), "hours", "ends before it starts"),
        ("UTC", {"mon": ["25:00-26:00"]}, (), "hours", "not a time of day"),
        ("UTC", {"mon": ["09:00-13:00", "12:00-17:00"]}, (), "hours", "overlap"),
        ("UTC", {}, (), "hours", "at least one hour"),
        ("UTC", WEEKDAYS, ("25/12/2026",), "holidays", "not a date"),
    ],
)
def test_a_calendar_that_makes_no_sense_is_refused_naming_what_to_fix(
    zone: str, hours: dict[str, list[str]], holidays: tuple[str, ...], field: str, says: str
) -> None:
    with pytest.raises(ValidationProblem) as refused:
        bh.calendar(zone, hours, holidays)
    assert refused.value.field == field and says in refused.value.detail


def test_a_calendar_closed_for_ever_says_so_instead_of_searching_for_ever() -> None:
    cal = bh.calendar("UTC", {"mon": ["09:00-10:00"]})
    with pytest.raises(ValidationProblem):
        cal.due(datetime(2026, 12, 7, tzinfo=UTC), 400 * 366 * 24 * HOUR)


def _first(cal: bh.Calendar, since: datetime, n: int) -> list[tuple[datetime, datetime]]:
    out = []
    for span in cal.intervals(since):
        out.append(span)
        if len(out) == n:
            break
    return out
