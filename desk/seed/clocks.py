"""The demo's clocks (desk/seed/demo.py): Acme's SLA policy and time rules, written through
sla_store and rule_sql as an admin's save writes them (docs/architecture.md, "Business hours").
Only when the team has none: a policy or rules already there, perhaps edited since, stay."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from desk.helpdesk import sla_store
from desk.ledger.sql import one
from desk.work import rule_sql

HOUR = 3600
# Acme's SLA: business seconds by target and priority (desk/helpdesk/sla_store.py's shape).
DEMO_CALENDAR = {
    "zone": "Asia/Shanghai",
    "hours": {d: ["09:00-17:00"] for d in ("mon", "tue", "wed", "thu", "fri")},
    "holidays": ["2027-01-01", "2027-02-06", "2027-02-07", "2027-02-08"],
}
DEMO_TARGETS = {
    "first_response": {"URGENT": HOUR, "HIGH": 4 * HOUR, "NORMAL": 8 * HOUR, "LOW": 16 * HOUR},
    "next_response": {"URGENT": 2 * HOUR, "HIGH": 8 * HOUR, "NORMAL": 16 * HOUR},
    "resolution": {"URGENT": 8 * HOUR, "HIGH": 24 * HOUR, "NORMAL": 40 * HOUR},
}
DEMO_RULES = {"close": 7, "remind": 3, "resolve": 4}  # days, as time_rules.Rules has them


async def ensure_clocks(conn: AsyncConnection, team: int, admin: int, now: datetime) -> int:
    """The team's SLA policy and time rules when it has none; how many were written. The
    rules' first run is the scheduler's pass's (`rule_runs.ensure_runs`), as for any team. The
    policy is written without replanning the open tickets (set_team_policy's `CHANGED` hooks):
    each ticket's clocks start at its next change, so a fresh demo's task lists are not a
    hundred SLA timers before anyone has worked."""
    written = 0
    if await sla_store.load(conn, team) is None:
        await sla_store.save(conn, team, calendar=DEMO_CALENDAR, targets=DEMO_TARGETS,
                             warn_share=0.75, by=admin, now=now)  # fmt: skip
        written += 1
    if await one(conn, rule_sql.RULES, {"team": team}) is None:
        await one(conn, rule_sql.SAVE, {"team": team, "by": admin, "now": now, **DEMO_RULES})
        written += 1
    return written
