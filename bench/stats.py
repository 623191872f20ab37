"""Figures and the table: percentiles, one `Row` per measured statistic, pass/miss, JSON output.

A row holds every run's value for our side and for the baseline (measured alternately in the
same run), so the table shows medians with min-max and the JSON keeps the raw samples.
"""

from __future__ import annotations

import json
import platform
import statistics
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank-with-interpolation percentile (p in 0..100); nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


@dataclass(frozen=True)
class Target:
    """What passes: `ratio <= x`, `ratio >= x`, or our median `<= x` (in the row's unit)."""

    kind: str  # "ratio<=", "ratio>=", "value<="
    limit: float

    def describe(self, unit: str) -> str:
        if self.kind == "value<=":
            return f"<= {_num(self.limit)} {unit}"
        return f"ratio {self.kind[5:]} {self.limit:g}"

    def met(self, ours: float, ratio: float | None) -> bool:
        if self.kind == "value<=":
            return ours <= self.limit
        if ratio is None:
            return False
        return ratio <= self.limit if self.kind == "ratio<=" else ratio >= self.limit


@dataclass
class Row:
    name: str
    unit: str
    ours: list[float]
    base: list[float] = field(default_factory=list)
    target: Target | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ours_median(self) -> float:
        return statistics.median(self.ours) if self.ours else float("nan")

    @property
    def base_median(self) -> float | None:
        return statistics.median(self.base) if self.base else None

    @property
    def ratio(self) -> float | None:
        base = self.base_median
        if base is None or base == 0 or not self.ours:
            return None
        return self.ours_median / base

    @property
    def verdict(self) -> str:
        if not self.ours:
            return "error"
        if self.target is None:
            return "info"
        return "pass" if self.target.met(self.ours_median, self.ratio) else "miss"

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["target"] = (
            None if self.target is None else {"kind": self.target.kind, "limit": self.target.limit}
        )
        out |= {
            "ours_median": self.ours_median,
            "base_median": self.base_median,
            "ratio": self.ratio,
            "verdict": self.verdict,
        }
        return out


def _num(x: float) -> str:
    if x != x:  # nan
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _spread(values: list[float], unit: str) -> str:
    if not values:
        return "—"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{_num(med)} {unit}"
    return f"{_num(med)} ({_num(min(values))}-{_num(max(values))}) {unit}"


HEADERS = ("benchmark", "ours: median (min-max)", "baseline: median (min-max)", "ratio", "target")


def table(rows: list[Row]) -> str:
    """The rows as a fixed-width text table, notes underneath."""
    cells = [
        (
            r.name,
            _spread(r.ours, r.unit),
            _spread(r.base, r.unit),
            "—" if r.ratio is None else f"{r.ratio:.2f}",
            "—" if r.target is None else r.target.describe(r.unit),
            r.verdict,
        )
        for r in rows
    ]
    head = (*HEADERS, "result")
    widths = [max(len(str(c[i])) for c in [head, *cells]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for c in cells:
        lines.append("  ".join(str(x).ljust(w) for x, w in zip(c, widths, strict=True)))
    notes = [f"  {r.name}: {r.note}" for r in rows if r.note]
    if notes:
        lines += ["", "notes:", *notes]
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    import os

    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def save(rows: list[Row], folder: Path, meta: dict[str, Any]) -> Path:
    """Write the run as JSON (`bench/results/<UTC time>.json`); returns the path."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = folder / f"{stamp}{'-quick' if meta.get('quick') else ''}.json"
    doc = {"when": stamp, "machine": machine(), **meta, "rows": [r.as_json() for r in rows]}
    path.write_text(json.dumps(doc, indent=2, default=str))
    return path
