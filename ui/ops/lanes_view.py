"""The console's view of lanes, read through `desk.lanes` (branch i10: `lane_of(kind)`,
`pause(rt, lane, by_user_id)`, `resume(rt, lane, by_user_id)`, `states(rt)`).

Read through importlib so the console still renders (one lane per kind, never paused) in a
build without lanes; pause and resume then answer that lanes are not available.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from types import ModuleType
from typing import Any

from desk.errors import ValidationProblem
from desk.models import TaskKind
from desk.runtime import Runtime


@dataclass(frozen=True)
class LaneView:
    name: str
    kinds: list[str]
    paused: bool = False
    paused_by: str | None = None
    paused_at: datetime | None = None
    slots: Any = None  # as desk.lanes reports them (used / total)
    extra: dict[str, Any] = field(default_factory=dict)


def _module() -> ModuleType | None:
    try:
        return importlib.import_module("desk.lanes")
    except ImportError:
        return None


def available() -> bool:
    return _module() is not None


def lane_of(kind: str) -> str:
    mod = _module()
    return str(mod.lane_of(kind)) if mod else kind.lower()


def _get(state: Any, name: str, default: Any = None) -> Any:
    if isinstance(state, dict):
        return state.get(name, default)
    return getattr(state, name, default)


async def lanes(rt: Runtime) -> list[LaneView]:
    mod = _module()
    if mod is None:
        return [LaneView(k.value.lower(), [k.value]) for k in TaskKind if k != TaskKind.NOOP]
    out = []
    for s in await mod.states(rt):
        paused_by = _get(s, "paused_by")
        out.append(
            LaneView(
                name=str(_get(s, "name")),
                kinds=[str(k) for k in _get(s, "kinds", [])],
                paused=bool(_get(s, "paused", False)),
                paused_by=None if paused_by is None else str(paused_by),
                paused_at=_get(s, "paused_at"),
                slots=_get(s, "slots"),
            )
        )
    return out


async def set_paused(rt: Runtime, lane: str, by_user_id: int, paused: bool) -> None:
    mod = _module()
    if mod is None:
        raise ValidationProblem("lane", "this build has no lanes to pause")
    if lane not in {v.name for v in await lanes(rt)}:
        raise ValidationProblem("lane", "no such lane")
    await (mod.pause if paused else mod.resume)(rt, lane, by_user_id)
