"""A ticket's SLA state from its two columns, at a given instant, in Python and in the filter's
SQL alike; the filter's parsing (a typed problem naming `sla`), its stored form and its words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from desk.core.errors import ValidationProblem
from desk.helpdesk.filters import filter_sql, parse_filter
from desk.helpdesk.sla_state import SlaState, state_of

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)

CASES = [
    (None, None, SlaState.NONE),
    (NOW + 61 * M, None, SlaState.RUNNING),
    (NOW + 60 * M, None, SlaState.DUE_SOON),  # exactly an hour away: due soon
    (NOW + M, None, SlaState.DUE_SOON),
    (NOW, None, SlaState.BREACHED),  # due now, its breach not written yet
    (NOW - M, None, SlaState.BREACHED),
    (None, NOW - 60 * M, SlaState.BREACHED),  # answered since: the breach is kept
    (NOW + 5 * 60 * M, NOW - M, SlaState.BREACHED),  # a later target runs, one was missed
]


@pytest.mark.parametrize(("due", "breached", "want"), CASES)
def test_state_of(due, breached, want) -> None:
    assert state_of(due, breached, NOW) is want


async def test_the_sql_agrees_with_python(rt) -> None:
    values = ", ".join(
        f"({i}, CAST(:d{i} AS timestamptz), CAST(:b{i} AS timestamptz))" for i in range(len(CASES))
    )
    params = {f"d{i}": c[0] for i, c in enumerate(CASES)} | {
        f"b{i}": c[1] for i, c in enumerate(CASES)
    }
    for state in ("BREACHED", "DUE_SOON", "RUNNING"):
        where, more = filter_sql(
            parse_filter({"sla": state}), team_id=1, me=1, creator_id=None, staff=True, now=NOW
        )
        where = where.replace("t.team_id = :team_id AND ", "")
        sql = (
            f"SELECT t.i FROM (VALUES {values}) AS t(i, sla_due_at, sla_breached_at) WHERE {where}"
        )
        async with rt.engine.connect() as conn:
            got = set((await conn.execute(sa.text(sql), params | more)).scalars())
        assert got == {i for i, c in enumerate(CASES) if c[2] == state}, state


def test_parse_store_and_describe() -> None:
    f = parse_filter({"sla": "due_soon", "status": ["OPEN"]})
    assert f.sla == "DUE_SOON"
    assert f.as_dict() == {"assignment": "anyone", "status": ["OPEN"], "sla": "DUE_SOON"}
    assert f.describe() == "Open tickets, SLA due within the hour"
    # No SLA filter: the stored form (and so an export's scope) is as before.
    assert "sla" not in parse_filter({"sla": ""}).as_dict()
    with pytest.raises(ValidationProblem) as refused:
        parse_filter({"sla": "LATE"})
    assert refused.value.field == "sla"


def test_a_customers_sla_filter_matches_nothing() -> None:
    f = parse_filter({"sla": "BREACHED"})
    where, _ = filter_sql(f, team_id=1, me=3, creator_id=3, staff=False, now=NOW)
    assert where.endswith("AND FALSE")
    with pytest.raises(ValueError):  # staff's filter needs its instant
        filter_sql(f, team_id=1, me=1, creator_id=None, staff=True)
