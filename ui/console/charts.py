"""Small server-rendered SVG bar charts (no charting framework): finished tasks per minute,
completed and failed stacked, one bar per bucket."""

from __future__ import annotations

from dataclasses import dataclass

from desk.console.overview import Series

WIDTH = 600
HEIGHT = 90


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    ok_y: float
    ok_h: float
    bad_y: float
    bad_h: float
    title: str  # per-minute figures, for the tooltip


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: float  # tasks per minute at the top of the scale
    completed_per_min: float  # averages over the whole window
    failed_per_min: float
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def failure_pct(self) -> float | None:
        total = self.completed_per_min + self.failed_per_min
        return None if total == 0 else 100 * self.failed_per_min / total


def chart(series: Series) -> Chart:
    """Bars of per-minute rates (a 15-minute bucket shows its average per minute)."""
    n = len(series.completed)
    per = float(series.minutes)
    ok = [c / per for c in series.completed]
    bad = [f / per for f in series.failed]
    peak = max([o + b for o, b in zip(ok, bad, strict=True)] + [1.0])
    step = WIDTH / max(n, 1)
    bars = []
    for i, (o, b) in enumerate(zip(ok, bad, strict=True)):
        ok_h = HEIGHT * o / peak
        bad_h = HEIGHT * b / peak
        bars.append(
            Bar(
                x=round(i * step, 2),
                width=round(max(step - 1, 1), 2),
                ok_y=round(HEIGHT - ok_h, 2),
                ok_h=round(ok_h, 2),
                bad_y=round(HEIGHT - ok_h - bad_h, 2),
                bad_h=round(bad_h, 2),
                title=f"{o:g}/min ✓ · {b:g}/min ✗",
            )
        )
    minutes = max(n * per, 1)
    return Chart(bars, peak, sum(series.completed) / minutes, sum(series.failed) / minutes)
