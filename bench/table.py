"""How the report writes a figure: numbers, ratios, verdicts, Markdown tables, summary rows.

Every benchmark module reports through these: summary(result) returns its Rows for the
summary table (a figure, the baseline measured in the same run, their ratio, the target
and the verdict), details(result) the lines of its own section. bench/report.py puts the
page together.
"""

import math
from collections.abc import Callable, Iterable
from dataclasses import astuple, dataclass


def missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def num(value, digits: int = 1, unit: str = "") -> str:
    """A figure as the report prints it: floats to digits, with a unit; n/a when missing."""
    if missing(value):
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


def plain(value) -> str:
    """A figure in a details table: three digits below 10, one above."""
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def div(a, b) -> float | None:
    """a / b, or None when either is missing or b is 0."""
    if missing(a) or missing(b) or b == 0:
        return None
    return a / b


def mib(kib) -> float | None:
    return None if kib is None else kib / 1024


def get(d, *path, default=None):
    """d[path[0]][path[1]]..., or default where a key is missing."""
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return default
        d = d[key]
    return d


def check(value, test: Callable[[object], bool]) -> bool | None:
    """Whether value meets its target; None when it was not measured."""
    return None if missing(value) else bool(test(value))


QUOTIENT = object()  # compare()'s ratio unless another is given: value / base


@dataclass
class Row:
    """One line of the summary: a figure, its same-run baseline, their ratio, its target."""

    number: str
    figure: str
    measured: str
    baseline: str = ""
    ratio: str = ""
    target: str = ""
    ok: bool | None = None

    def cells(self) -> list[str]:
        verdict = "n/a" if self.ok is None else ("**PASS**" if self.ok else "**MISS**")
        return [*astuple(self)[:6], verdict]  # number, figure, ..., target


def compare(
    number: str,
    figure: str,
    value,
    base,
    label: str,
    digits: int = 1,
    unit: str = "",
    *,
    ratio=QUOTIENT,
    ratio_digits: int = 2,
    ratio_unit: str = "x",
    target: str = "",
    ok: bool | None = None,
) -> Row:
    """A figure beside its baseline in the same unit; the ratio is value / base unless given."""
    ratio = num(div(value, base) if ratio is QUOTIENT else ratio, ratio_digits, ratio_unit)
    measured, baseline = num(value, digits, unit), f"{label} {num(base, digits, unit)}"
    return Row(number, figure, measured, baseline, ratio, target, ok)


SUMMARY = ("#", "figure", "measured", "baseline (same run)", "ratio", "target", "result")


def table(header: Iterable[str], rows: Iterable[Iterable]) -> list[str]:
    """A Markdown table: the header, its rule, one line per row."""
    header = list(header)
    lines = ["|" + "".join(f" {h} |" if h else " |" for h in header), "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
