"""A mutation is judged by the time it arrived (issue 11): a reminder "in 10 s" is accepted even
when the server got to it 15 s late. The clock is injected: it moves 15 s right after the
reading the request's arrival is stamped with, as a slow server would."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from desk.core.errors import ValidationProblem
from desk.work import reminders
from tests.conftest import FakeClock

LATE = timedelta(seconds=15)
REMIND = (
    "mutation($t: ID!, $at: DateTime!) { scheduleReminder(ticketId: $t, at: $at) "
    "{ __typename ... on Task { runAt } ... on ValidationProblem { field message } } }"
)


class LateClock(FakeClock):
    """After `arm()`, the next reading is the arrival; every later one is 15 s on."""

    armed = False

    def arm(self) -> datetime:
        self.armed = True
        return self.now

    def __call__(self) -> datetime:
        value = self.now
        if self.armed:
            self.armed = False
            self.now += LATE
        return value


@pytest.fixture
def clock() -> LateClock:
    return LateClock()


async def test_graphql_judges_the_reminder_time_by_arrival(api, world, clock) -> None:
    arrival = clock.arm()  # the middleware's stamp is the request's first reading
    due = arrival + timedelta(seconds=10)
    body = await api(
        REMIND, {"t": str(world.tickets["login"]), "at": due.isoformat()}, user=world.staff
    )
    got = body["data"]["scheduleReminder"]
    assert got["__typename"] == "Task", got
    assert datetime.fromisoformat(got["runAt"]) == due
    assert clock.now == arrival + LATE  # the resolver did run 15 s "late"


async def test_a_time_past_at_arrival_is_still_refused(api, world, clock) -> None:
    arrival = clock.arm()
    due = arrival - timedelta(seconds=1)
    body = await api(
        REMIND, {"t": str(world.tickets["login"]), "at": due.isoformat()}, user=world.staff
    )
    assert body["data"]["scheduleReminder"]["__typename"] == "ValidationProblem"
    assert body["data"]["scheduleReminder"]["field"] == "at"


async def test_desk_uses_the_arrival_it_is_given(rt, world, clock) -> None:
    arrival = clock.now
    clock.advance(15)  # the server was slow to get to the request
    due = arrival + timedelta(seconds=10)
    ticket = world.tickets["printer"]
    with pytest.raises(ValidationProblem):  # judged by "now", it is already past
        await reminders.schedule_reminder(rt, world.staff, ticket, at=due)
    task = await reminders.schedule_reminder(rt, world.staff, ticket, at=due, arrived_at=arrival)
    assert task.run_at == due
