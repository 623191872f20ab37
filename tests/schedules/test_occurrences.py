"""Occurrence times: weekdays at a local time, kept across daylight-saving changes (pure)."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from desk.core.errors import ValidationProblem
from desk.work.occurrences import ALL_DAYS, next_after, parse_days, parse_time, parse_zone

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def _walk(days, at, zone, start, n):
    out, t = [], start
    for _ in range(n):
        t = next_after(days, at, zone, t)
        out.append(t)
    return out


def test_weekly_monday_8_stays_8_local_across_both_changes_in_berlin():
    runs = _walk((1,), "08:00", "Europe/Berlin", datetime(2027, 3, 15, tzinfo=UTC), 3)
    assert [r.astimezone(BERLIN).strftime("%a %H:%M") for r in runs] == ["Mon 08:00"] * 3
    assert [r.hour for r in runs] == [7, 7, 6], "UTC moves by the hour the clocks moved"
    autumn = _walk((1,), "08:00", "Europe/Berlin", datetime(2027, 10, 20, tzinfo=UTC), 2)
    assert [(r.astimezone(BERLIN).hour, r.hour) for r in autumn] == [(8, 6), (8, 7)]


def test_a_time_in_the_spring_gap_runs_at_the_first_valid_instant_after_it():
    # Berlin 2027-03-28: 02:00 jumps to 03:00, so 02:30 does not exist that day.
    runs = _walk(ALL_DAYS, "02:30", "Europe/Berlin", datetime(2027, 3, 27, 12, tzinfo=UTC), 3)
    local = [r.astimezone(BERLIN) for r in runs]
    assert local[0] == datetime(2027, 3, 28, 3, 0, tzinfo=BERLIN)
    assert [x.strftime("%d %H:%M") for x in local[1:]] == ["29 02:30", "30 02:30"]
    # New York 2027-03-14: 02:00 jumps to 03:00.
    ny = _walk(ALL_DAYS, "02:15", "America/New_York", datetime(2027, 3, 13, 12, tzinfo=UTC), 2)
    assert ny[0] == datetime(2027, 3, 14, 7, 0, tzinfo=UTC)  # 03:00 EDT
    assert ny[1].astimezone(NEW_YORK).strftime("%d %H:%M") == "15 02:15"


def test_an_ambiguous_time_on_the_fall_back_day_runs_once_the_first_time():
    # Berlin 2027-10-31: 03:00 goes back to 02:00, so 02:30 happens twice.
    runs = _walk(ALL_DAYS, "02:30", "Europe/Berlin", datetime(2027, 10, 30, 12, tzinfo=UTC), 2)
    assert runs[0] == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # 02:30 CEST, the first
    assert runs[1] == datetime(2027, 11, 1, 1, 30, tzinfo=UTC), "not again at 02:30 CET"
    # New York 2027-11-07: 01:30 happens twice.
    ny = _walk(ALL_DAYS, "01:30", "America/New_York", datetime(2027, 11, 6, 12, tzinfo=UTC), 2)
    assert ny[0] == datetime(2027, 11, 7, 5, 30, tzinfo=UTC)  # 01:30 EDT
    assert ny[1] == datetime(2027, 11, 8, 6, 30, tzinfo=UTC)


def test_strictly_after_and_weekday_choice():
    mon_8 = datetime(2027, 1, 4, 8, tzinfo=UTC)  # a Monday
    assert next_after((1, 3), "08:00", "UTC", mon_8) == datetime(2027, 1, 6, 8, tzinfo=UTC)
    assert next_after((1, 3), "08:00", "UTC", mon_8.replace(hour=7)) == mon_8


@pytest.mark.parametrize(
    "field, call, raw",
    [
        ("days", parse_days, []),
        ("days", parse_days, [0]),
        ("days", parse_days, [8]),
        ("days", parse_days, ["1"]),
        ("days", parse_days, [True]),
        ("time", parse_time, "25:00"),
        ("time", parse_time, "8:00"),
        ("time", parse_time, "12:60"),
        ("time", parse_time, "08:00\x00"),
        ("timezone", parse_zone, "Mars/Olympus"),
        ("timezone", parse_zone, "../../etc/passwd"),
        ("timezone", parse_zone, "Europe/Berlin\x00"),
    ],
)
def test_odd_input_is_a_validation_problem_naming_the_field(field, call, raw):
    with pytest.raises(ValidationProblem) as got:
        call(field, raw)
    assert got.value.field == field


def test_good_input_is_normalised():
    assert parse_days("days", [3, 1, 3]) == (1, 3)
    assert parse_time("time", "23:59") == "23:59"
    assert parse_zone("timezone", "America/New_York") == "America/New_York"
