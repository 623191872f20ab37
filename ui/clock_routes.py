"""The team's clocks page `/clocks`: its admins edit the SLA policy (time zone, open hours by
day, holidays, minutes per target and priority, warn %) and the time rules (days for each), and
see the latest rule runs with the tickets each touched. The rules are desk.helpdesk.sla_store's
and desk.work.rule_runs', as for GraphQL and REST (minutes ↔ seconds in desk.helpdesk.sla_forms);
anyone but the team's admins gets exactly what an unknown address answers (ui/admin_only.py). A
value to fix is shown beside its field, the form keeping what was typed (422)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.datastructures import FormData

from desk.core.errors import ValidationProblem
from desk.core.models import Priority
from desk.core.runtime import Runtime
from desk.helpdesk import sla_forms, sla_store
from desk.helpdesk.business_hours import DAYS
from desk.helpdesk.sla import TARGETS
from desk.helpdesk.time_rules import Rules
from desk.work import rule_runs
from ui.admin_only import admin_team, as_missing
from ui.render import fragment_or_page, is_htmx
from ui.route import UiRoute, redirect
from ui.viewer import PageViewer, Viewer
from web.auth import RuntimeDep

router = APIRouter(route_class=UiRoute)

DAY_NAMES = dict(zip(DAYS, ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday",
                            "Sunday"), strict=True))  # fmt: skip
TARGET_NAMES = {"first_response": "First response", "next_response": "Next response",
                "resolution": "Resolution"}  # fmt: skip
RULE_FIELDS = ("close_resolved_after", "remind_pending_after", "resolve_pending_after")
PRIORITIES = tuple(p.value for p in Priority)
RUNS_SHOWN = 10


def _sla_form(stored: sla_store.StoredPolicy | None) -> dict[str, Any]:
    """The policy as the form's fields (text), or an empty form."""
    if stored is None:
        return {"zone": "", "hours": {}, "holidays": "", "minutes": {}, "warn": "75"}
    f = sla_forms.shown(stored)
    return {
        "zone": f.zone, "hours": {d: ", ".join(s) for d, s in f.hours.items()},
        "holidays": "\n".join(f.holidays),
        "minutes": {f"{t}:{p}": str(m) for t, p, m in sla_forms.flat_minutes(f.minutes)},
        "warn": f"{round(f.warn_share * 100, 2):g}",
    }  # fmt: skip


def _rules_form(rules: Rules) -> dict[str, str]:
    return {n: "" if getattr(rules, n) is None else str(getattr(rules, n)) for n in RULE_FIELDS}


async def _answer(
    request: Request, rt: Runtime, v: Viewer, team: int, *, status: int = 200, **extra: Any
) -> Response:
    if request.method == "POST" and not is_htmx(request) and status < 400:
        return redirect(request, "/clocks")
    stored = await sla_store.get_team_policy(rt, v.user_id, team)
    saved = await rule_runs.read_rules(rt, v.user_id, team)
    runs = await rule_runs.list_runs(rt, v.user_id, team, limit=RUNS_SHOWN)
    context = {
        "v": v, "has_policy": stored is not None, "sla": extra.pop("sla", None) or _sla_form(stored),
        "rules": extra.pop("rules", None) or _rules_form(saved.rules), "rules_at": saved.updated_at,
        "runs": runs, "days": DAY_NAMES, "targets": TARGET_NAMES, "priorities": PRIORITIES,
        **extra,
    }  # fmt: skip
    return fragment_or_page(request, "clocks.html", context, "clocks", status=status)


@router.get("/clocks")
async def clocks_page(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    return await _answer(request, rt, v, team)


def _text(data: FormData, name: str) -> str:
    value = data.get(name)
    return value.strip() if isinstance(value, str) else ""


def _typed_sla(data: FormData) -> dict[str, Any]:
    return {
        "zone": _text(data, "zone"),
        "hours": {d: _text(data, f"hours_{d}") for d in DAYS if _text(data, f"hours_{d}")},
        "holidays": _text(data, "holidays"),
        "minutes": {f"{t}:{p}": _text(data, f"min_{t}_{p}") for t in TARGETS for p in PRIORITIES
                    if _text(data, f"min_{t}_{p}")},
        "warn": _text(data, "warn_percent"),
    }  # fmt: skip


def _policy_form(typed: dict[str, Any]) -> sla_forms.PolicyForm:
    minutes: dict[str, dict[str, Any]] = {}
    for key, value in typed["minutes"].items():
        target, priority = key.split(":")
        minutes.setdefault(target, {})[priority] = sla_forms.minutes_of(target, priority, value)
    hours = sla_forms.hours_of((d, sla_forms.spans_of(s)) for d, s in typed["hours"].items())
    return sla_forms.PolicyForm(
        zone=typed["zone"], hours=hours, holidays=sla_forms.holidays_of(typed["holidays"]),
        minutes=minutes, warn_share=sla_forms.share_of(typed["warn"] or "75", percent=True),
    )  # fmt: skip


@router.post("/clocks/sla")
async def save_sla(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    typed = _typed_sla(await request.form())
    try:
        form = _policy_form(typed)
        calendar, targets = sla_forms.docs(form)
        await sla_store.set_team_policy(rt, v.user_id, team, calendar=calendar, targets=targets,
                                        warn_share=form.warn_share)  # fmt: skip
    except ValidationProblem as problem:
        return await _answer(request, rt, v, team, status=422, problem=problem, sla=typed)
    return await _answer(request, rt, v, team, done="sla_saved")


@router.post("/clocks/sla/clear")
async def clear_sla(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    await sla_store.clear_team_policy(rt, v.user_id, team)
    return await _answer(request, rt, v, team, done="sla_cleared")


def _days(name: str, text: str) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) < 6):
        raise ValidationProblem(name, "give a whole number of days, or leave it empty for off")
    return int(text)


@router.post("/clocks/rules")
async def save_rules(request: Request, rt: RuntimeDep, v: PageViewer) -> Response:
    if (team := await admin_team(rt, v)) is None:
        return await as_missing(request)
    data = await request.form()
    typed = {n: _text(data, n) for n in RULE_FIELDS}
    try:
        rules = Rules(*(_days(n, typed[n]) for n in RULE_FIELDS))
        await rule_runs.save_rules(rt, v.user_id, team, rules)
    except ValidationProblem as problem:
        return await _answer(request, rt, v, team, status=422, problem=problem, rules=typed)
    return await _answer(request, rt, v, team, done="rules_saved")
