"""A team's clocks over REST (docs/rest.md, "SLA policy and time rules"): read, replace and drop
the team's SLA policy (`/teams/{team_id}/sla-policy`) and its time rules with their latest runs
(`/teams/{team_id}/time-rules`).

The rules are desk.helpdesk.sla_store's and desk.work.rule_runs', as for GraphQL and the pages:
staff and admins read, admins write (staff: 403), anyone else is answered 404 exactly as for a
missing team. Minutes on this face, seconds stored (desk.helpdesk.sla_forms, shared with the
others). The bodies' schemas say what they can of the desk's checks (time formats, bounds, known
zones, "a resolve needs a reminder first"); what a schema cannot say (overlapping hours, a date
that is not on the calendar) is a 422 naming the field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar
from zoneinfo import available_timezones

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from api.openapi import ERRORS
from api.rest import PREFIX, caller_of
from desk.core.errors import ValidationProblem
from desk.helpdesk import sla_forms, sla_store
from desk.helpdesk.sla_store import StoredPolicy
from desk.helpdesk.time_rules import MAX_DAYS, Rules
from desk.reads import lookups
from desk.work import rule_runs
from desk.work.rule_runs import Run, Saved
from web.auth import RuntimeDep

router = APIRouter(prefix=PREFIX, tags=["clocks"])
RUNS_SHOWN = 10

Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
Target = Literal["first_response", "next_response", "resolution"]
PriorityName = Literal["LOW", "NORMAL", "HIGH", "URGENT"]
_HM = "([01][0-9]|2[0-3]):[0-5][0-9]"
Span = Annotated[str, Field(pattern=f"^{_HM}-({_HM}|24:00)$", description="e.g. 09:00-17:30")]
Holiday = Annotated[
    str,
    Field(pattern="^[12][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$",
          description="A whole local day closed, e.g. 2026-12-25"),
]  # fmt: skip


def _whole(value: Any) -> Any:
    """JSON Schema's integer: 60 or 60.0, never "60" or true (refused as not an integer)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("give a whole number")
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("give a number between 0 and 1")
    return value


Whole = BeforeValidator(_whole)
Minutes = Annotated[int, Whole, Field(ge=1, le=sla_forms.MAX_MINUTES)]
Days = Annotated[int, Whole, Field(ge=1, le=MAX_DAYS)]
_ZONES: list[Any] = sorted(available_timezones())


class SlaPolicyIn(BaseModel):
    """The whole policy: it replaces the team's previous one."""

    model_config = ConfigDict(extra="forbid")

    zone: str = Field(
        max_length=64, description="IANA time zone, e.g. Europe/Berlin",
        json_schema_extra={"enum": _ZONES},
    )  # fmt: skip
    hours: dict[Day, Annotated[list[Span], Field(min_length=1, max_length=24)]] = Field(
        min_length=1, description="Open spans by day; a day left out is closed"
    )
    holidays: list[Holiday] = Field(default_factory=list, max_length=400)
    targets: dict[Target, Annotated[dict[PriorityName, Minutes], Field(min_length=1)]] = Field(
        min_length=1, description="Whole minutes of business time by target and priority"
    )
    warn_share: Annotated[float, BeforeValidator(_number)] = Field(
        0.75, gt=0, lt=1, description="Share of a target at which to warn"
    )

    def form(self) -> sla_forms.PolicyForm:
        return sla_forms.PolicyForm(
            zone=self.zone, hours={d: list(s) for d, s in self.hours.items()},
            holidays=list(self.holidays),
            minutes={t: {str(p): m for p, m in by.items()} for t, by in self.targets.items()},
            warn_share=float(self.warn_share),
        )  # fmt: skip


class SlaPolicyOut(BaseModel):
    zone: str
    hours: dict[str, list[str]] = Field(description="Open days in week order")
    holidays: list[str]
    targets: dict[str, dict[str, int]] = Field(description="Minutes by target and priority")
    warn_share: float
    updated_at: datetime


class SlaAnswer(BaseModel):
    team_id: int
    policy: SlaPolicyOut | None = Field(description="null: the team has no SLA")


class SlaCleared(BaseModel):
    team_id: int
    had_policy: bool


# resolve_pending_after needs remind_pending_after (desk.helpdesk.time_rules.Rules), said so in
# the document too, so a generated client knows it.
_REMIND_FIRST: dict[str, Any] = {
    "if": {"properties": {"resolve_pending_after": {"type": "integer"}},
           "required": ["resolve_pending_after"]},
    "then": {"properties": {"remind_pending_after": {"type": "integer"}},
             "required": ["remind_pending_after"]},
}  # fmt: skip


class TimeRulesIn(BaseModel):
    """The whole set of rules in calendar days; null or left out: that rule is off."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_REMIND_FIRST)

    close_resolved_after: Days | None = Field(None, description="RESOLVED this long → CLOSED")
    remind_pending_after: Days | None = Field(
        None, description="PENDING this long → the customer is reminded"
    )
    resolve_pending_after: Days | None = Field(
        None, description="No answer this long after the reminder → RESOLVED"
    )


class TouchedOut(BaseModel):
    ticket_id: int
    title: str
    rule: Literal["close", "remind", "resolve"]
    acted_at: datetime


class RunOut(BaseModel):
    task_id: int = Field(description="The TIME_RULE task: /api/v1/tasks/{task_id}")
    status: Literal["WAITING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"]
    run_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    summary: str
    error: str | None
    touched: list[TouchedOut] = Field(description="The tickets it acted on, oldest act first")


class TimeRulesOut(BaseModel):
    team_id: int
    close_resolved_after: int | None
    remind_pending_after: int | None
    resolve_pending_after: int | None
    updated_at: datetime | None = Field(description="null: never saved")
    runs: list[RunOut] = Field(description=f"The latest {RUNS_SHOWN}, newest first")


def policy_json(s: StoredPolicy) -> dict[str, Any]:
    form = sla_forms.shown(s)
    return {
        "zone": form.zone, "hours": form.hours, "holidays": form.holidays,
        "targets": form.minutes, "warn_share": form.warn_share,
        "updated_at": s.updated_at.isoformat(),
    }  # fmt: skip


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def run_json(r: Run) -> dict[str, Any]:
    return {
        "task_id": r.task_id, "status": r.status, "run_at": r.run_at.isoformat(),
        "started_at": _iso(r.started_at), "finished_at": _iso(r.finished_at),
        "summary": r.summary, "error": r.error,
        "touched": [{"ticket_id": t.ticket_id, "title": t.title, "rule": t.rule,
                     "acted_at": t.acted_at.isoformat()} for t in r.touched],
    }  # fmt: skip


async def _rules_json(rt: Any, user_id: int, team: int, saved: Saved | None = None) -> Any:
    if saved is None:
        saved = await rule_runs.read_rules(rt, user_id, team)
    runs = await rule_runs.list_runs(rt, user_id, team, limit=RUNS_SHOWN)
    r = saved.rules
    return {
        "team_id": team, "close_resolved_after": r.close_resolved_after,
        "remind_pending_after": r.remind_pending_after,
        "resolve_pending_after": r.resolve_pending_after,
        "updated_at": _iso(saved.updated_at), "runs": [run_json(x) for x in runs],
    }  # fmt: skip


_SLA = "/teams/{team_id}/sla-policy"
_RULES = "/teams/{team_id}/time-rules"


@router.get(_SLA, response_model=SlaAnswer, responses=ERRORS.read)
async def get_sla_policy(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """The team's SLA policy (staff and admins); `policy` null when the team has none."""
    caller = await caller_of(rt, request, write=False)
    team = lookups.require_id(team_id, "Team")
    found = await sla_store.get_team_policy(rt, caller.user_id, team)
    return JSONResponse({"team_id": team, "policy": policy_json(found) if found else None})


def _json_in(model: type[BaseModel]) -> dict[str, Any]:
    """`openapi_extra` for a JSON body the route reads itself, after the caller is known to be
    an admin of the team (FastAPI would read it first: anyone's odd body a 422, not the 404 or
    403 the caller is owed)."""
    schema = {"application/json": {"schema": model.model_json_schema()}}
    return {"requestBody": {"required": True, "content": schema}}


M = TypeVar("M", bound=BaseModel)


def _body(model: type[M], raw: bytes) -> M:
    """The JSON body, or a 422 naming the field to fix (its top-level name)."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["type"] in ("json_invalid", "model_type", "json_type"):
            raise ValidationProblem("body", "send a JSON object (UTF-8)") from None
        where = [str(p) for p in first["loc"][:1]]
        raise ValidationProblem(where[0] if where else "body", first["msg"]) from None


@router.put(_SLA, response_model=SlaAnswer, responses=ERRORS.write,
            openapi_extra=_json_in(SlaPolicyIn))  # fmt: skip
async def put_sla_policy(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """Replace the team's SLA policy (admins). Timers already planned move at each ticket's
    next change."""
    caller = await caller_of(rt, request, write=True)
    team = lookups.require_id(team_id, "Team")
    await sla_store.check_admin(rt, caller.user_id, team)
    form = _body(SlaPolicyIn, await request.body()).form()
    calendar, targets = sla_forms.docs(form)
    stored = await sla_store.set_team_policy(
        rt, caller.user_id, team, calendar=calendar, targets=targets, warn_share=form.warn_share
    )
    return JSONResponse({"team_id": team, "policy": policy_json(stored)})


@router.delete(_SLA, response_model=SlaCleared, responses=ERRORS.write)
async def delete_sla_policy(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """Drop the team's SLA policy (admins); its tickets carry no due times from their next
    change on."""
    caller = await caller_of(rt, request, write=True)
    team = lookups.require_id(team_id, "Team")
    had = await sla_store.clear_team_policy(rt, caller.user_id, team)
    return JSONResponse({"team_id": team, "had_policy": had})


@router.get(_RULES, response_model=TimeRulesOut, responses=ERRORS.read)
async def get_time_rules(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """The team's time rules and latest runs, each with the tickets it touched (staff, admins)."""
    caller = await caller_of(rt, request, write=False)
    team = lookups.require_id(team_id, "Team")
    return JSONResponse(await _rules_json(rt, caller.user_id, team))


@router.put(_RULES, response_model=TimeRulesOut, responses=ERRORS.write,
            openapi_extra=_json_in(TimeRulesIn))  # fmt: skip
async def put_time_rules(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """Replace the team's time rules (admins); a run starts at once."""
    caller = await caller_of(rt, request, write=True)
    team = lookups.require_id(team_id, "Team")
    await sla_store.check_admin(rt, caller.user_id, team)  # the same rule as the SLA's
    body = _body(TimeRulesIn, await request.body())
    rules = Rules(body.close_resolved_after, body.remind_pending_after,
                  body.resolve_pending_after)  # fmt: skip
    saved = await rule_runs.save_rules(rt, caller.user_id, team, rules)
    return JSONResponse(await _rules_json(rt, caller.user_id, team, saved))


@router.delete(_RULES, response_model=TimeRulesOut, responses=ERRORS.write)
async def delete_time_rules(team_id: str, request: Request, rt: RuntimeDep) -> JSONResponse:
    """Turn every time rule of the team off (admins)."""
    caller = await caller_of(rt, request, write=True)
    team = lookups.require_id(team_id, "Team")
    saved = await rule_runs.save_rules(rt, caller.user_id, team, Rules())
    return JSONResponse(await _rules_json(rt, caller.user_id, team, saved))
