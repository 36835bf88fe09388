"""Bar charts as server-rendered SVG: geometry here, markup in templates/partials/_chart.html.

No script and no style attributes (a strict CSP is coming): each bar is a <rect> with
its series as a class, coloured by static/css/app.css.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from babel.dates import format_skeleton
from flask_babel import format_number, get_locale, get_timezone, gettext

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


def stacked_hours(rows: list[dict[str, Any]], series: Mapping[str, str]) -> Chart:
    """Lay out one stacked bar per hour, the series bottom-up, scaled to the busiest hour.

    `series` maps each row key to its name in the reader's language, for the bars' titles.
    """
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
            label = gettext(
                "%(day)s %(time)s: %(num)s %(outcome)s",
                day=_local(row["hour"], "Md"),
                time=_local(row["hour"], "Hm"),
                num=format_number(row[s]),
                outcome=series[s],
            )
            bars.append(
                Bar(round(i * slot, 2), round(base, 2), round(slot - gap, 2), round(h, 2), s,
                    label)
            )  # fmt: skip
    # Evenly spaced labels on the reader's clock: every six hours in a day, each
    # midnight in a week (a fixed count of bars would land on uneven dates).
    daily = len(rows) > 24
    ticks = [
        (round(i * slot, 2), _local(row["hour"], "Md" if daily else "Hm"))
        for i, row in enumerate(rows)
        if _local_hour(row["hour"]) % (24 if daily else 6) == 0
    ]
    total = sum(row[s] for row in rows for s in series)
    return Chart(WIDTH, HEIGHT, bars, ticks, peak, total, plot)


def _local(hour: datetime, skeleton: str) -> str:
    # In the reader's time zone and the locale's own order: "11/30 14:00", "14:00".
    return format_skeleton(skeleton, hour, tzinfo=get_timezone(), locale=get_locale())


def _local_hour(hour: datetime) -> int:
    return hour.astimezone(get_timezone()).hour
