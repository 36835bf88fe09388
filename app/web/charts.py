"""Bar charts as server-rendered SVG: geometry here, markup in templates/partials/_chart.html.

No script and no style attributes (a strict CSP is coming): each bar is a <rect> with
its series as a class, coloured by static/css/app.css.
"""

from dataclasses import dataclass
from typing import Any

WIDTH = 600
HEIGHT = 200
AXIS = 28  # room under the bars for the hour labels


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: str
    label: str  # the <title>: what a hover or a screen reader is told


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    ticks: list[tuple[float, str]]  # x and text of the axis labels
    peak: int
    total: int
    baseline: float  # the y of the bars' foot, above the labels


def stacked_hours(rows: list[dict[str, Any]], series: tuple[str, ...]) -> Chart:
    """Lay out one stacked bar per hour, the series bottom-up, scaled to the busiest hour."""
    peak = max((sum(row[s] for s in series) for row in rows), default=0)
    slot = WIDTH / max(len(rows), 1)
    gap = min(1.0, slot * 0.2)
    plot = HEIGHT - AXIS
    bars: list[Bar] = []
    for i, row in enumerate(rows):
        base = plot
        for s in series:
            if not row[s]:
                continue
            h = plot * row[s] / peak
            base -= h
            when = row["hour"].strftime("%m-%d %H:00")
            bars.append(
                Bar(round(i * slot, 2), round(base, 2), round(slot - gap, 2), round(h, 2), s,
                    f"{when} UTC: {row[s]} {s}")
            )  # fmt: skip
    step = max(1, len(rows) // 4)  # about four labels: readable on a phone
    ticks = [
        (round(i * slot, 2), row["hour"].strftime("%H:00" if len(rows) <= 24 else "%m-%d"))
        for i, row in enumerate(rows)
        if i % step == 0
    ]
    total = sum(row[s] for row in rows for s in series)
    return Chart(WIDTH, HEIGHT, bars, ticks, peak, total, plot)
