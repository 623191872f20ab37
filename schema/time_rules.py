"""A team's time rules over GraphQL: `timeRules(teamId)` (the rules and the latest runs, each
with the tickets it touched), `setTimeRules` and `clearTimeRules` (docs/architecture.md, "Time
rules on the ledger"). The rules live in desk.work.rule_runs: staff and admins read them, admins
write them, anyone else is told the team does not exist; saving (or clearing) starts the team's
TIME_RULE run at once, so the rules act without waiting for the scheduler's pass."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.models import TaskStatus
from desk.helpdesk.time_rules import MAX_DAYS, Rules
from desk.work import rule_runs
from desk.work.rule_runs import Run, Saved
from schema import problems as e
from schema.context import Context
from schema.problems import attempt, team_of, team_query

RUNS_SHOWN = 10  # the latest runs `timeRules` lists


@strawberry.enum(description="What a time rule did to a ticket.")
class TimeRuleAct(Enum):
    CLOSE = "close"
    REMIND = "remind"
    RESOLVE = "resolve"


@strawberry.type(description="A ticket one run of the time rules acted on.")
class TimeRuleTouch:
    ticket_id: ID
    title: str
    act: TimeRuleAct
    acted_at: datetime


@strawberry.type(description="One run of the team's time rules (a TIME_RULE task).")
class TimeRuleRun:
    task_id: ID
    status: TaskStatus
    run_at: datetime = strawberry.field(description="When it was due to start.")
    started_at: datetime | None
    finished_at: datetime | None
    summary: str
    error: str | None
    touched: list[TimeRuleTouch] = strawberry.field(description="Oldest act first.")

    @classmethod
    def of(cls, r: Run) -> TimeRuleRun:
        return cls(
            task_id=ID(str(r.task_id)), status=TaskStatus(r.status), run_at=r.run_at,
            started_at=r.started_at, finished_at=r.finished_at, summary=r.summary,
            error=r.error,
            touched=[
                TimeRuleTouch(ticket_id=ID(str(t.ticket_id)), title=t.title,
                              act=TimeRuleAct(t.rule), acted_at=t.acted_at)
                for t in r.touched
            ],
        )  # fmt: skip


@strawberry.type(description="A team's time rules in calendar days; null: that rule is off.")
class TimeRules:
    team_id: ID
    close_resolved_after: int | None = strawberry.field(
        description="Days a ticket stays RESOLVED before it is CLOSED."
    )
    remind_pending_after: int | None = strawberry.field(
        description="Days a ticket stays PENDING before the customer is reminded."
    )
    resolve_pending_after: int | None = strawberry.field(
        description="Days after that reminder, with no answer, before it is RESOLVED."
    )
    updated_at: datetime | None = strawberry.field(description="Null: never saved.")
    runs: list[TimeRuleRun] = strawberry.field(
        description=f"The latest {RUNS_SHOWN} runs, newest first, with the tickets each touched."
    )

    @classmethod
    def of(cls, team: int, saved: Saved, runs: list[Run]) -> TimeRules:
        r = saved.rules
        return cls(
            team_id=ID(str(team)), close_resolved_after=r.close_resolved_after,
            remind_pending_after=r.remind_pending_after,
            resolve_pending_after=r.resolve_pending_after, updated_at=saved.updated_at,
            runs=[TimeRuleRun.of(x) for x in runs],
        )  # fmt: skip


@strawberry.input(description=f"The whole set of rules (days, 1 to {MAX_DAYS}; null: off).")
class TimeRulesInput:
    close_resolved_after: int | None = None
    remind_pending_after: int | None = None
    resolve_pending_after: int | None = strawberry.field(
        default=None, description="Needs remindPendingAfter: the customer is reminded first."
    )


TimeRulesResult = Annotated[TimeRules | e.NotFound, strawberry.union("TimeRulesResult")]
SetTimeRulesResult = Annotated[
    TimeRules | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("SetTimeRulesResult"),
]


async def _answer(ctx: Context, user_id: int, team: int, saved: Saved | None = None) -> TimeRules:
    if saved is None:
        saved = await rule_runs.read_rules(ctx.rt, user_id, team)
    runs = await rule_runs.list_runs(ctx.rt, user_id, team, limit=RUNS_SHOWN)
    return TimeRules.of(team, saved, runs)


@strawberry.type
class TimeRulesQuery:
    @strawberry.field(
        description="The team's time rules and latest runs, for its staff and admins; NotFound "
        "for anyone else, exactly as for a team that does not exist."
    )
    async def time_rules(self, info: strawberry.Info, team_id: ID) -> TimeRulesResult:
        return await team_query(info, team_id, _answer)


async def _save(info: strawberry.Info, team_id: ID, given: TimeRulesInput | None) -> object:
    async def run(ctx: Context, user_id: int) -> TimeRules:
        team = team_of(team_id)
        rules = Rules()
        if given is not None:  # Rules checks the days: ValidationProblem naming the rule
            rules = Rules(given.close_resolved_after, given.remind_pending_after,
                          given.resolve_pending_after)  # fmt: skip
        saved = await rule_runs.save_rules(ctx.rt, user_id, team, rules)
        return await _answer(ctx, user_id, team, saved)

    return await attempt(info, run, (e.ValidationProblem, e.NotFound, e.NotAllowed))


@strawberry.type
class TimeRulesMutation:
    @strawberry.mutation(
        description="Set the team's time rules (admins; they replace the previous ones and a "
        "run starts at once). A value that cannot be used is a ValidationProblem naming it: "
        "closeResolvedAfter, remindPendingAfter, resolvePendingAfter."
    )
    async def set_time_rules(
        self, info: strawberry.Info, team_id: ID, input: TimeRulesInput
    ) -> SetTimeRulesResult | None:
        return await _save(info, team_id, input)  # type: ignore[return-value]

    @strawberry.mutation(description="Turn every time rule of the team off (admins).")
    async def clear_time_rules(
        self, info: strawberry.Info, team_id: ID
    ) -> SetTimeRulesResult | None:
        return await _save(info, team_id, None)  # type: ignore[return-value]
