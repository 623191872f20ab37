"""A team's SLA policy over GraphQL: `slaPolicy(teamId)`, `setSlaPolicy`, `clearSlaPolicy`
(docs/architecture.md, "SLA faces"). The rules live in desk.helpdesk.sla_store (staff and
admins read the policy, admins write it; anyone else is told the team does not exist) and the
minutes ↔ seconds of the faces in desk.helpdesk.sla_forms."""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Annotated

import strawberry
from strawberry import ID

from desk.core.models import Priority
from desk.helpdesk import sla_forms, sla_store
from desk.helpdesk.sla_store import StoredPolicy
from schema import problems as e
from schema.context import Context
from schema.problems import attempt, team_of, team_query
from schema.ticket_sla import SlaTarget  # a ticket's clocks name it too (schema/types.py)


@strawberry.enum(description="A day of the week, Monday first.")
class Weekday(Enum):
    MON = "mon"
    TUE = "tue"
    WED = "wed"
    THU = "thu"
    FRI = "fri"
    SAT = "sat"
    SUN = "sun"


@strawberry.type(description="One day's open hours: spans like 09:00-17:00 (24:00 ends a day).")
class SlaDayHours:
    day: Weekday
    spans: list[str]


@strawberry.type(description="The business time allowed for a target at a ticket priority.")
class SlaTargetMinutes:
    target: SlaTarget
    priority: Priority
    minutes: int


@strawberry.type(description="A team's SLA: business hours and targets by priority.")
class SlaPolicy:
    team_id: ID
    zone: str = strawberry.field(description="IANA time zone of the hours and holidays.")
    hours: list[SlaDayHours] = strawberry.field(description="Open days; a day left out is closed.")
    holidays: list[str] = strawberry.field(description="Whole local days closed (YYYY-MM-DD).")
    targets: list[SlaTargetMinutes]
    warn_share: float = strawberry.field(description="Share of a target at which to warn.")
    updated_at: datetime

    @classmethod
    def from_stored(cls, s: StoredPolicy) -> SlaPolicy:
        form = sla_forms.shown(s)
        return cls(
            team_id=ID(str(s.team_id)),
            zone=form.zone,
            hours=[SlaDayHours(day=Weekday(d), spans=spans) for d, spans in form.hours.items()],
            holidays=form.holidays,
            targets=[
                SlaTargetMinutes(target=SlaTarget(t), priority=Priority(p), minutes=m)
                for t, p, m in sla_forms.flat_minutes(form.minutes)
            ],
            warn_share=form.warn_share,
            updated_at=s.updated_at,
        )


@strawberry.type(description="The team has no SLA: its tickets carry no due times.")
class NoSlaPolicy:
    team_id: ID


@strawberry.type
class SlaPolicyCleared:
    team_id: ID
    had_policy: bool


@strawberry.input
class SlaDayHoursInput:
    day: Weekday
    spans: list[str] = strawberry.field(description='e.g. ["09:00-12:00", "13:00-17:30"]')


@strawberry.input
class SlaTargetInput:
    target: SlaTarget
    priority: Priority
    minutes: int = strawberry.field(description="Whole minutes of business time, at least 1.")


@strawberry.input(description="The whole policy: it replaces the team's previous one.")
class SlaPolicyInput:
    zone: str = strawberry.field(description="IANA time zone, e.g. Europe/Berlin.")
    hours: list[SlaDayHoursInput]
    targets: list[SlaTargetInput]
    holidays: list[str] = strawberry.field(default_factory=list, description="YYYY-MM-DD.")
    warn_share: float = 0.75

    def form(self) -> sla_forms.PolicyForm:
        minutes: dict[str, dict[str, int]] = {}
        for t in self.targets:
            minutes.setdefault(t.target.value, {})[t.priority.value] = t.minutes
        return sla_forms.PolicyForm(
            zone=self.zone,
            hours=sla_forms.hours_of((h.day.value, h.spans) for h in self.hours),
            holidays=list(self.holidays),
            minutes=minutes,
            warn_share=self.warn_share,
        )


SlaPolicyResult = Annotated[
    SlaPolicy | NoSlaPolicy | e.NotFound, strawberry.union("SlaPolicyResult")
]
SetSlaPolicyResult = Annotated[
    SlaPolicy | e.ValidationProblem | e.NotFound | e.NotAllowed,
    strawberry.union("SetSlaPolicyResult"),
]
ClearSlaPolicyResult = Annotated[
    SlaPolicyCleared | e.NotFound | e.NotAllowed, strawberry.union("ClearSlaPolicyResult")
]


@strawberry.type
class SlaQuery:
    @strawberry.field(
        description="The team's SLA policy, for its staff and admins; NotFound for anyone else, "
        "exactly as for a team that does not exist."
    )
    async def sla_policy(self, info: strawberry.Info, team_id: ID) -> SlaPolicyResult:
        async def read(ctx: Context, user_id: int, team: int) -> SlaPolicy | NoSlaPolicy:
            found = await sla_store.get_team_policy(ctx.rt, user_id, team)
            return SlaPolicy.from_stored(found) if found else NoSlaPolicy(team_id=ID(str(team)))

        return await team_query(info, team_id, read)


@strawberry.type
class SlaMutation:
    @strawberry.mutation(
        description="Set the team's SLA policy (admins; it replaces the previous one). A part "
        "that cannot be met is a ValidationProblem naming it: zone, hours, holidays, targets, "
        "firstResponse / nextResponse / resolution (a priority's minutes), warnShare."
    )
    async def set_sla_policy(
        self, info: strawberry.Info, team_id: ID, input: SlaPolicyInput
    ) -> SetSlaPolicyResult | None:
        async def run(ctx: Context, user_id: int) -> SlaPolicy:
            form = input.form()
            calendar, targets = sla_forms.docs(form)
            share = sla_forms.share_of(form.warn_share)
            stored = await sla_store.set_team_policy(
                ctx.rt, user_id, team_of(team_id), calendar=calendar, targets=targets,
                warn_share=share,
            )  # fmt: skip
            return SlaPolicy.from_stored(stored)

        allowed = (e.ValidationProblem, e.NotFound, e.NotAllowed)
        return await attempt(info, run, allowed)  # type: ignore[return-value]

    @strawberry.mutation(description="Drop the team's SLA policy (admins).")
    async def clear_sla_policy(
        self, info: strawberry.Info, team_id: ID
    ) -> ClearSlaPolicyResult | None:
        async def run(ctx: Context, user_id: int) -> SlaPolicyCleared:
            team = team_of(team_id)
            had = await sla_store.clear_team_policy(ctx.rt, user_id, team)
            return SlaPolicyCleared(team_id=ID(str(team)), had_policy=had)

        return await attempt(info, run, (e.NotFound, e.NotAllowed))  # type: ignore[return-value]
