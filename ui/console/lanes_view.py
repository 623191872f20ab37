"""The console's view of lanes (`desk.ledger.lanes`): each lane's kinds, pause state (and who paused
it), and its slots in use across the live workers (their heartbeats report per-lane `slots` and
`used`); pausing and resuming, audited."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from desk.core.runtime import Runtime
from desk.ledger import lanes
from desk.people.operators import Scope


@dataclass(frozen=True)
class LaneView:
    name: str
    kinds: tuple[str, ...]
    paused: bool
    paused_by: str | None  # the e-mail of who paused it ("cli" when done from the command line)
    paused_at: datetime | None
    slots_per_worker: int
    used: int  # slots in use now, over every live worker
    total: int  # slots over every live worker


def lane_of(kind: str) -> str:
    return lanes.lane_of(kind)


async def lanes_now(rt: Runtime, workers: list[dict[str, Any]]) -> list[LaneView]:
    states = await lanes.states(rt)
    ids = [s.paused_by for s in states if s.paused_by is not None]
    emails: dict[int, str] = {}
    if ids:
        async with rt.engine.connect() as conn:
            rows = await conn.execute(
                sa.text("SELECT id, email FROM app_user WHERE id = ANY(:ids)"), {"ids": ids}
            )
            emails = {r.id: r.email for r in rows}
    out = []
    for s in states:
        per = [w.get("lanes", {}).get(s.name, {}) for w in workers]
        per = [p for p in per if isinstance(p, dict)]
        by = emails.get(s.paused_by) if s.paused_by is not None else ("cli" if s.paused else None)
        out.append(
            LaneView(
                name=s.name,
                kinds=s.kinds,
                paused=s.paused,
                paused_by=by,
                paused_at=s.paused_at,
                slots_per_worker=s.slots,
                used=sum(int(p.get("used", 0)) for p in per),
                total=sum(int(p.get("slots", 0)) for p in per),
            )
        )
    return out


async def set_paused(rt: Runtime, scope: Scope, lane: str, paused: bool) -> None:
    """Pause or resume (a typed 422 for an unknown lane); the audit row commits with it."""
    if paused:
        await lanes.pause(rt, lane, scope.user_id, scope.actor)
    else:
        await lanes.resume(rt, lane, scope.user_id, scope.actor)
